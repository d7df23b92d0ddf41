"""Pending actuals: kept with their verdict, named uniquely within a run, superseded by the
next run of their test, found by name or path, accepted once (also by several processes at
once) or rejected. Both environments."""

from __future__ import annotations

import json
import os
import sys

import pytest

import tracekit
from tracekit.errors import UsageError
from tracekit.lifecycle import pending
from tracekit._ci import in_ci
from tracekit.lifecycle.workspace import Workspace
from tracekit.store import provenance

from ..support import ROOT
from ..support.lifecycle import bump, legacy_golden, replayed


@pytest.fixture
def project(tmp_path):
    (tmp_path / "goldens").mkdir()
    golden = legacy_golden(str(tmp_path / "goldens" / "toy.h5"))
    return Workspace(str(tmp_path)), golden


def keep(workspace, golden, actual, test="tests/test_x.py::test_toy", run="run1", name="toy"):
    return pending.keep(workspace, name, actual, golden=golden, kind=pending.MISMATCH, headline="step 2, loss/loss",
                        report="MISMATCH ...\nfirst divergence: step 2, loss/loss", test=test, run=run)


def test_an_entry_is_the_trace_its_metadata_and_its_report(project, tmp_path):
    workspace, golden = project
    actual = replayed(str(tmp_path / "a.h5"), change=bump(2, "loss/loss"))
    entry = keep(workspace, golden, actual)
    assert open(entry.trace, "rb").read() == open(actual, "rb").read()
    data = json.load(open(entry.meta_path))
    assert data["golden"] == "goldens/toy.h5" and data["test"] == "tests/test_x.py::test_toy"
    assert data["kind"] == "mismatch" and data["headline"] == "step 2, loss/loss" and data["run"] == "run1"
    assert "first divergence" in entry.report()
    assert pending.entries(workspace) == [entry]
    assert open(os.path.join(workspace.path, ".gitignore")).read().splitlines()[-1] == "*"


def test_names_are_unique_within_a_run_and_superseded_by_the_next_run(project, tmp_path):
    workspace, golden = project
    actual = replayed(str(tmp_path / "a.h5"))
    first = keep(workspace, golden, actual, test="t::a")
    second = keep(workspace, golden, actual, test="t::b")
    assert (first.name, second.name) == ("toy", "toy~2")
    # The next run of t::a drops what its last run left, not t::b's entry.
    assert pending.clear_stale(workspace, golden, "t::a", "run2") == 1
    assert [e.name for e in pending.entries(workspace)] == ["toy~2"]
    assert pending.clear_stale(workspace, golden, "t::b", "run1") == 0  # its own run: kept


def test_find_by_name_or_path(project, tmp_path):
    workspace, golden = project
    entry = keep(workspace, golden, replayed(str(tmp_path / "a.h5")))
    assert pending.find(workspace, "toy") == entry
    assert pending.find(workspace, entry.trace) == entry and pending.find(workspace, entry.meta_path) == entry
    with pytest.raises(UsageError, match=r"no pending actual nope .*\(pending: toy\)"):
        pending.find(workspace, "nope")


def test_accept_writes_the_golden_once_and_drops_the_entry(project, tmp_path):
    workspace, golden = project
    actual = replayed(str(tmp_path / "a.h5"), change=bump(2, "loss/loss"))
    entry = keep(workspace, golden, actual)
    written = pending.accept(workspace, entry, reason="intended")
    assert written.path == golden and os.path.exists(written.kept)
    assert pending.entries(workspace) == [] and not os.listdir(workspace.pending)
    with tracekit.open(golden) as trace:
        prov = provenance.read(trace.meta, trace.created)
        assert float(trace.step(2)["loss/loss"]) == pytest.approx(1 / 3 + 1e-3)
    assert [(u.reason, u.by, u.test) for u in prov.updates] == [("intended", "tracekit accept", entry.test)]
    with pytest.raises(UsageError, match="another process accepted or rejected it"):
        pending.accept(workspace, entry)


def test_reject_keeps_the_golden(project, tmp_path):
    workspace, golden = project
    before = open(golden, "rb").read()
    entry = keep(workspace, golden, replayed(str(tmp_path / "a.h5"), change=bump(0, "loss/loss")))
    pending.reject(workspace, entry)
    assert pending.entries(workspace) == [] and open(golden, "rb").read() == before
    with pytest.raises(UsageError, match="gone"):
        pending.reject(workspace, entry)


def test_an_entry_replaced_by_a_newer_run_is_not_accepted_unseen(project, tmp_path):
    workspace, golden = project
    listed = keep(workspace, golden, replayed(str(tmp_path / "a.h5"), change=bump(1, "loss/loss")), run="run1")
    # A test run replaces it (same test, same golden, same name) while someone reviews the old one.
    pending.clear_stale(workspace, golden, listed.test, "run2")
    newer = keep(workspace, golden, replayed(str(tmp_path / "b.h5"), change=bump(2, "loss/loss")), run="run2")
    assert newer.name == listed.name
    with pytest.raises(UsageError, match="replaced by a newer test run since it was listed"):
        pending.accept(workspace, listed)
    pending.accept(workspace, newer)


def test_a_golden_path_finds_its_one_entry_and_all_refuses_two(project, tmp_path):
    workspace, golden = project
    first = keep(workspace, golden, replayed(str(tmp_path / "a.h5")), test="t::a")
    assert pending.find(workspace, golden) == first
    second = keep(workspace, golden, replayed(str(tmp_path / "b.h5")), test="t::b")
    with pytest.raises(UsageError, match=r"2 pending actuals for .*toy.h5 \(toy, toy~2\): name the one"):
        pending.find(workspace, golden)
    with pytest.raises(UsageError, match=r"several pending actuals for one golden: goldens/toy.h5 \(toy, toy~2\)"):
        pending.one_per_golden([first, second])
    pending.one_per_golden([first])


ACCEPT = """
import sys, time
from tracekit.lifecycle import pending
from tracekit.lifecycle.workspace import Workspace
workspace = Workspace(sys.argv[1])
entry = pending.find(workspace, sys.argv[2])
time.sleep(max(0.0, float(sys.argv[3]) - time.time()))  # start together
try:
    pending.accept(workspace, entry, reason=sys.argv[2])
except Exception as exc:
    print("refused", exc)
else:
    print("accepted")
"""


def test_processes_accepting_at_once_take_turns(project, tmp_path):
    import subprocess
    import time

    workspace, golden = project
    for name, step in (("toy", 1), ("toy~2", 2)):
        actual = replayed(str(tmp_path / (name + ".h5")), change=bump(step, "loss/loss"))
        entry = keep(workspace, golden, actual, test="t::" + name, name="toy")
        assert entry.name == name
    script = str(tmp_path / "accept.py")
    with open(script, "w") as fh:
        fh.write(ACCEPT)
    start = str(time.time() + 2.0)
    env = dict(os.environ, PYTHONPATH=ROOT)
    # Three processes: two accept the same entry (one must be refused), one the other entry.
    procs = [subprocess.Popen([sys.executable, script, workspace.root, name, start], stdout=subprocess.PIPE,
                              universal_newlines=True, env=env) for name in ("toy", "toy", "toy~2")]
    outputs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert sorted(o.split()[0] for o in outputs) == ["accepted", "accepted", "refused"], outputs
    with tracekit.open(golden) as trace:
        prov = provenance.read(trace.meta, trace.created)
    # Both accepted updates are in the history, each replacing the one before: nothing lost.
    assert sorted(u.reason for u in prov.updates) == ["toy", "toy~2"]
    assert [u.replaced_origin for u in prov.updates] == [provenance.RECORDED, provenance.DERIVED]
    assert tracekit.verify(golden).ok
    assert [f for f in os.listdir(os.path.dirname(golden)) if f.startswith(".")] == []


def test_workspace_is_found_upwards_and_ci_is_read_like_ci_services_set_it(tmp_path):
    (tmp_path / ".tracekit").mkdir()
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert Workspace.find(str(deep)).root == str(tmp_path)
    assert Workspace.find(str(tmp_path / "a")).relative(str(deep / "g.h5")) == "a/b/g.h5"
    assert [in_ci({"CI": v}) for v in ("true", "1", "yes", "false", "0", "", "FALSE")] == [True] * 3 + [False] * 4
    assert not in_ci({})


def test_scripts_ask_the_same_definition_of_ci():
    # tools/bootstrap and tools/test run tracekit/_ci.py as a file (no environment built yet)
    import subprocess
    import sys

    import tracekit

    script = os.path.join(os.path.dirname(tracekit.__file__), "_ci.py")
    for value in ("true", "1", "yes", "false", "0", "", "FALSE"):
        ran = subprocess.run([sys.executable, "-S", script], env=dict(os.environ, CI=value))
        assert (ran.returncode == 0) == in_ci({"CI": value}), value
