"""Writing a golden from a TF2 run: the data, the description it keeps, its provenance and
drift, the replaced file kept, and nothing written in place. Both environments."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tracekit
from tracekit.errors import UsageError
from tracekit.lifecycle import update
from tracekit.lifecycle.update import retire, write_golden
from tracekit.lifecycle.workspace import Workspace
from tracekit.store import provenance

from ..support import build_golden
from ..support.lifecycle import LEGACY_META, bump, legacy_golden, replayed, step_values


@pytest.fixture
def project(tmp_path):
    goldens = tmp_path / "goldens"
    goldens.mkdir()
    return Workspace(str(tmp_path)), str(goldens / "toy.h5")


def values(path):
    with tracekit.open(path) as trace:
        return [{key: np.asarray(step[key]).tobytes() for key in step} for step in [trace.initial] + list(trace)]


def test_a_new_golden_is_the_runs_data_and_derived(project, tmp_path):
    workspace, golden = project
    actual = replayed(str(tmp_path / "actual.h5"))
    written = write_golden(actual, golden, workspace, by="pytest --tracekit-update=new", reason="first port",
                           test="tests/test_port.py::test_toy")
    assert written.created and written.kept is None and written.drift == []
    assert values(golden) == values(actual)
    with tracekit.open(golden) as trace:
        assert "replay" not in trace.meta and trace.meta["environment"]["cpu"] == "Modern CPU"
        assert [trace.step(k).info for k in range(len(trace))] == [{}] * 4  # no replay bookkeeping
        prov = provenance.read(trace.meta, trace.created)
    assert prov.derived and prov.recording is None and prov.owners == ["tests/test_port.py::test_toy"]
    [entry] = prov.updates
    assert entry.created and entry.reason == "first port" and entry.by == "pytest --tracekit-update=new"
    assert entry.tensorflow == "2.21.0" and entry.environment["cpu"] == "Modern CPU" and entry.steps == 4


def test_an_update_keeps_the_recording_its_description_and_the_replaced_file(project, tmp_path):
    workspace, golden = project
    legacy_golden(golden)
    before = open(golden, "rb").read()
    actual = replayed(str(tmp_path / "actual.h5"), change=bump(2, "loss/loss", 0.25))
    written = write_golden(actual, golden, workspace, by="tracekit accept", reason="new loss",
                           test="tests/test_port.py::test_toy")
    assert not written.created and open(written.kept, "rb").read() == before
    assert written.kept.startswith(os.path.join(workspace.history, "goldens", "toy."))
    assert os.listdir(os.path.dirname(golden)) == ["toy.h5"]  # no temporary file left
    assert values(golden) == values(actual)
    with tracekit.open(golden) as trace:
        for key in ("user", "train_ops", "slots"):  # what the legacy code was, kept
            assert trace.meta[key] == LEGACY_META[key]
        assert trace.meta["program"]["entry"] == "port.py"  # what computed the data: the TF2 run
        assert "recording" not in trace.meta and "replay" not in trace.meta
        assert trace.step(1).info == {"global_step": 2, "train_ops": ["GradientDescent"]}
        prov = provenance.read(trace.meta, trace.created)
    assert prov.derived and prov.stored
    assert prov.recording.environment["cpu"] == "Legacy CPU" and prov.recording.tensorflow == {"version": "1.15.5"}
    assert prov.recording.command == "train.py"  # inferred from the older recording's program
    [entry] = prov.updates
    assert entry.replaced == os.path.relpath(written.kept, workspace.root)  # the same in every checkout
    assert entry.replaced_origin == provenance.RECORDED
    drift = {d.kind: d for d in entry.drift}
    assert drift["loss"].changed == 1 and drift["loss"].first_step == 2 and drift["loss"].max_abs == pytest.approx(0.25)
    assert drift["grad"].changed == 0 and drift["grad"].first_step is None and drift["var"].tensors == 1


def test_two_updates_append_to_the_history(project, tmp_path):
    workspace, golden = project
    legacy_golden(golden)
    write_golden(replayed(str(tmp_path / "a.h5"), change=bump(1, "grad/w:0")), golden, workspace, by="one",
                 reason="first", test="t::a")
    write_golden(replayed(str(tmp_path / "b.h5"), change=bump(3, "var/w:0")), golden, workspace, by="two",
                 reason="second", test="t::b")
    with tracekit.open(golden) as trace:
        prov = provenance.read(trace.meta, trace.created)
    assert [u.reason for u in prov.updates] == ["first", "second"] and prov.owners == ["t::a", "t::b"]
    assert prov.recording.environment["cpu"] == "Legacy CPU"  # still the recording's, not the first update's
    first, second = prov.updates
    assert first.replaced_origin == provenance.RECORDED and second.replaced_origin == provenance.DERIVED
    # The second drift is against the first update's data: its grad change is undone, var moved at step 3.
    drift = {d.kind: d for d in second.drift}
    assert drift["grad"].first_step == 1 and drift["var"].first_step == 3
    assert len(os.listdir(os.path.join(workspace.history, "goldens"))) == 2


def test_keep_false_keeps_nothing(project, tmp_path):
    workspace, golden = project
    legacy_golden(golden)
    written = write_golden(replayed(str(tmp_path / "a.h5")), golden, workspace, by="x", keep=False)
    assert written.kept is None and not os.path.exists(workspace.history)


@pytest.mark.parametrize("case", ["limited", "recording", "unfinished"])
def test_what_cannot_become_a_golden_is_refused_and_changes_nothing(project, tmp_path, case):
    workspace, golden = project
    legacy_golden(golden)
    before = open(golden, "rb").read()
    if case == "limited":
        source, message = replayed(str(tmp_path / "a.h5"), steps=2, limited=True), "would drop the golden's last 2"
    elif case == "recording":
        source, message = legacy_golden(str(tmp_path / "a.h5")), "not a TF2 run's trace"
    else:
        source = replayed(str(tmp_path / "a.h5"))
        w = tracekit.create(str(tmp_path / "b.h5"), meta={"replay": {}})
        with w.step():
            w.add("loss", "loss", np.float32(1))
        w._sink.journal.close()  # a writer that died: the trace stays unfinished
        source, message = str(tmp_path / "b.h5"), "unfinished"
    with pytest.raises(UsageError, match=message):
        write_golden(source, golden, workspace, by="x")
    assert open(golden, "rb").read() == before and not os.path.exists(workspace.history)


@pytest.mark.parametrize("failing", ["the write", "the rename"])
def test_a_failed_write_leaves_the_golden_whole_and_nothing_else(project, tmp_path, monkeypatch, failing):
    workspace, golden = project
    legacy_golden(golden)
    before = open(golden, "rb").read()
    actual = replayed(str(tmp_path / "a.h5"), change=bump(0, "loss/loss"))

    def broken_write(source, path, meta, infos, initial):
        with open(path, "wb") as fh:
            fh.write(b"half a golden")
        raise OSError(28, "No space left on device")

    def broken_rename(temporary, path):
        raise OSError(18, "Invalid cross-device link")
    if failing == "the write":
        monkeypatch.setattr(update, "_copy", broken_write)
    else:
        monkeypatch.setattr(update.atomic, "publish", broken_rename)
    with pytest.raises(OSError):
        write_golden(actual, golden, workspace, by="x")
    assert open(golden, "rb").read() == before
    assert os.listdir(os.path.dirname(golden)) == ["toy.h5"]
    assert not os.path.exists(workspace.history) or not any(files for _, _, files in os.walk(workspace.history))


def test_nothing_is_written_or_moved_in_ci(project, tmp_path, monkeypatch):
    workspace, golden = project
    legacy_golden(golden)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(UsageError, match=r"CI is set \(CI=true\): tracekit does not write .* in CI"):
        write_golden(replayed(str(tmp_path / "a.h5")), golden, workspace, by="x")
    with pytest.raises(UsageError, match="does not move"):
        retire(golden, workspace, "unused")
    assert os.path.exists(golden)


def test_retire_moves_a_golden_to_the_history(project):
    workspace, golden = project
    legacy_golden(golden)
    before = open(golden, "rb").read()
    moved = retire(golden, workspace, "unused")
    assert not os.path.exists(golden) and open(moved, "rb").read() == before and moved.endswith(".unused.h5")


@pytest.mark.parametrize("init, kept", [("golden", True), ("seed", False)])
def test_the_initial_state_a_run_made_only_at_its_first_step_is_kept_from_the_golden(project, tmp_path, init, kept):
    # Keras makes its optimizer slots at the first update: a replay's trace has them in its steps
    # but not before them. With init='golden' the replay loaded them from the golden, which the
    # new golden keeps; with init='seed' it started from the port's own, which nothing holds.
    workspace, golden = project
    slot = np.full((3, 2), 0.25, np.float32)
    build_golden(golden, (dict(s, **{"slot/w/Adam:0": s["var/w:0"] * 0}) for s in step_values(4)),
                 {"var/w:0": np.zeros((3, 2), np.float32), "slot/w/Adam:0": slot}, meta=dict(LEGACY_META))
    actual = str(tmp_path / "a.h5")
    build_golden(actual, (dict(s, **{"slot/w/Adam:0": s["var/w:0"] + 1}) for s in step_values(4)),
                 {"var/w:0": np.zeros((3, 2), np.float32)},
                 meta={"replay": {"golden": "g.h5", "steps": 4, "limited": False, "init": init}})
    written = write_golden(actual, golden, workspace, by="test")
    assert written.provenance.last.initial_kept == (["slot/w/Adam:0"] if kept else [])
    with tracekit.open(golden) as trace:
        assert ("slot/w/Adam:0" in trace.initial) == kept
        if kept:
            assert np.array_equal(trace.initial["slot/w/Adam:0"], slot)
        assert np.array_equal(trace.step(3)["slot/w/Adam:0"], list(step_values(4))[3]["var/w:0"] + 1)


def test_an_update_keeps_the_digests_a_run_kept(project, tmp_path):
    """A replay of a golden with keyframes keeps digests between them; the golden written from it too."""
    workspace, golden = project
    legacy_golden(golden)
    actual = str(tmp_path / "actual.h5")
    rng = np.random.RandomState(0)
    kept = {}
    with tracekit.create(actual, meta={"replay": {"golden": "g.h5", "steps": 4, "limited": False}}) as writer:
        for k in range(4):
            with writer.step(info={"golden_step": k}):
                writer.add("loss", "loss", np.float32(k))
                kept[k] = rng.randn(3000).astype(np.float32)
                writer.add("grad", "w:0", kept[k], digest=k % 2 == 1)
    write_golden(actual, golden, workspace, by="tracekit accept", reason="keyframes")
    with tracekit.open(golden) as trace:
        assert [sorted(trace.step(k).digests) for k in range(4)] == [[], ["grad/w:0"], [], ["grad/w:0"]]
        copied, made = trace.step(3).digests["grad/w:0"], tracekit.store.digest.digest(kept[3])
        assert copied.crc is None and (copied.sum, copied.max) == (made.sum, made.max)
        np.testing.assert_array_equal(trace.step(2)["grad/w:0"], kept[2])
    assert tracekit.verify(golden).ok
