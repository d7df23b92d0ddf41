"""--tracekit-update=none|new|all (and --tracekit-reason, --tracekit-no-keep): which goldens a
run may write; a legacy recording is only ever replaced by `all`, and kept in the history."""

from __future__ import annotations

import pytest

import tracekit
from tracekit.cli import main
from tracekit.store import provenance

WRONG = """
from port import make

def test_port(tracekit_replay):
    model, step = make(activation=%r)
    tracekit_replay("seed_example", step, model=model)
"""


def golden_bytes(project):
    return (project.path / "goldens" / "seed_example.h5").read_bytes()


def history(project):
    with tracekit.open(str(project.path / "goldens" / "seed_example.h5")) as trace:
        return provenance.read(trace.meta, trace.created)


@pytest.mark.parametrize("mode", ["none", "new"])
def test_none_and_new_never_touch_an_existing_golden(project, mode):
    project.makepyfile(test_port=WRONG % "relu")
    before = golden_bytes(project)
    result = project.runpytest("-p", "no:cacheprovider", "--tracekit-update=" + mode)
    result.assert_outcomes(failed=1)
    assert golden_bytes(project) == before
    assert (project.path / ".tracekit" / "pending" / "seed_example.h5").exists()


def test_all_rewrites_a_failing_golden_twice_and_log_shows_both(project, capsys):
    project.makepyfile(test_port=WRONG % "relu")
    before = golden_bytes(project)
    result = project.runpytest("-p", "no:cacheprovider", "--tracekit-update=all", "--tracekit-reason", "relu on purpose")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["replays: 0 passed, 0 failed, 0 missing, 0 created, 1 updated; 0 pending, 0 unused",
                                 "  updated  goldens/seed_example.h5 (test_port.py::test_port): step 0, tap/layer1*"])
    [kept] = (project.path / ".tracekit" / "history" / "goldens").iterdir()
    assert kept.read_bytes() == before  # the legacy recording is kept
    # The rewritten golden now holds the relu port's run: it passes without any update.
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    # A second intentional change.
    project.makepyfile(test_port=WRONG % "tanh")
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["golden is DERIVED: its data comes from a TF2 run (updated *: relu on purpose), "
                                 "not from the legacy code; the legacy recording it replaced is kept at "
                                 ".tracekit/history/goldens/seed_example.*.h5 (tracekit log *seed_example.h5)"])
    project.runpytest("-p", "no:cacheprovider", "--tracekit-update=all", "--tracekit-reason",
                      "tanh now").assert_outcomes(passed=1)
    prov = history(project)
    assert prov.derived and [u.reason for u in prov.updates] == ["relu on purpose", "tanh now"]
    assert [u.by for u in prov.updates] == ["pytest --tracekit-update=all"] * 2
    assert prov.owners == ["test_port.py::test_port"] and prov.recording.tensorflow["version"] == "1.15.5"
    assert [u.replaced_origin for u in prov.updates] == ["recorded", "derived"]
    capsys.readouterr()
    main(["log", str(project.path / "goldens" / "seed_example.h5")])
    log = capsys.readouterr().out
    assert log.count("drift against the golden it replaced") == 2 and "relu on purpose" in log and "tanh now" in log
    for part in log.split("update 2"):
        # relu vs the legacy recording, then tanh vs relu: every tap changed, from step 0
        rows = {line.split()[0]: line.split()[1:] for line in part.splitlines() if line.startswith("    ")}
        assert rows["tap"][0] == "3/3" and rows["tap"][-2:] == ["step", "0"] and rows["input"][0] == "0/2"


def test_all_leaves_passing_goldens_alone_unless_the_test_is_named(project):
    project.makepyfile(test_port=WRONG % None)
    before = golden_bytes(project)
    project.runpytest("-p", "no:cacheprovider", "--tracekit-update=all").assert_outcomes(passed=1)
    assert golden_bytes(project) == before and not (project.path / ".tracekit" / "history").exists()
    result = project.runpytest("-p", "no:cacheprovider", "--tracekit-update=all", "--tracekit-no-keep",
                               "test_port.py::test_port")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 updated*"])
    assert golden_bytes(project) != before and history(project).derived
    assert not (project.path / ".tracekit" / "history").exists()  # --tracekit-no-keep


def test_all_refuses_a_replay_of_fewer_steps(project):
    project.makepyfile(test_port="""
from port import make

def test_port(tracekit_replay):
    model, step = make(activation="relu")
    tracekit_replay("seed_example", step, model=model, steps=3)
""")
    before = golden_bytes(project)
    result = project.runpytest("-p", "no:cacheprovider", "--tracekit-update=all")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["Mismatch: golden goldens/seed_example.h5: step 0, tap/layer1: *",
                                 "not rewritten: *replayed 3 of the 10 steps of * (steps=3): writing it would "
                                 "drop the golden's last 7 steps; replay every step to update it"])
    assert golden_bytes(project) == before
