"""Under pytest-xdist (-n 2) the workers replay and write, the controller keeps the books: the
summary counts every worker's tests, pending names never collide, and a golden used on one
worker is not unused because the other worker did not use it (the pitfall that made a
snapshot tool delete real snapshots)."""

from __future__ import annotations

import tracekit
from tracekit.store import provenance

DERIVED = """
import pytest
from port import DATA, make

@pytest.mark.parametrize("lr", [1e-3, 2e-3, 3e-3, 4e-3])
def test_derived(tracekit_replay, lr):
    model, step = make(lr=lr)
    tracekit_replay("lr_%g" % lr, step, model=model, data=DATA)
"""

TESTS = DERIVED + """
@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_wrong(tracekit_replay, activation):
    model, step = make(activation=activation)
    tracekit_replay("seed_example", step, model=model, steps=2)
"""


def test_two_workers_create_replay_and_keep_the_books(project):
    project.makepyfile(test_x=TESTS)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--tracekit-update=new",
                                          "--tracekit-unused=fail")
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines(["replays: 0 passed, 2 failed, 0 missing, 4 created, 0 updated; 2 pending, 0 unused"])
    names = sorted(p.name for p in (project.path / ".tracekit" / "pending").iterdir() if p.suffix == ".h5")
    assert names == ["seed_example.h5", "seed_example~2.h5"]
    for lr in ("0.001", "0.002", "0.003", "0.004"):
        with tracekit.open(str(project.path / "goldens" / ("lr_%s.h5" % lr))) as trace:
            assert provenance.read(trace.meta, trace.created).owners == ["test_x.py::test_derived[%s]" % lr]
    # Again without update, and only the derived goldens' tests: every golden is used on one worker
    # or the other, none is unused (which would fail this run), none is rewritten.
    project.makepyfile(test_x=DERIVED)
    before = {p.name: p.read_bytes() for p in (project.path / "goldens").iterdir()}
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--tracekit-unused=fail")
    result.assert_outcomes(passed=4)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["replays: 4 passed, 0 failed, 0 missing, 0 created, 0 updated; 0 pending, 0 unused"])
    assert {p.name: p.read_bytes() for p in (project.path / "goldens").iterdir()} == before


def test_an_unused_golden_is_found_across_workers(project):
    project.makepyfile(test_x=DERIVED)
    project.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--tracekit-update=new")
    # lr_0.004's test stops using it; the others keep theirs, spread over both workers.
    project.makepyfile(test_x=DERIVED.replace('tracekit_replay("lr_%g" % lr,',
                                              'None if lr == 4e-3 else tracekit_replay("lr_%g" % lr,'))
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--tracekit-unused=fail")
    result.assert_outcomes(passed=4)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["replays: 3 passed,*; 0 pending, 1 unused",
                                 "  unused   goldens/lr_0.004.h5 (owned by test_x.py::test_derived[[]0.004], *"])


def test_a_deselected_replay_test_on_any_worker_stops_the_judgement(project):
    project.makepyfile(test_x=DERIVED)
    project.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--tracekit-update=new")
    project.makepyfile(test_x=DERIVED.replace('tracekit_replay("lr_%g" % lr,',
                                              'None if lr == 4e-3 else tracekit_replay("lr_%g" % lr,'))
    # Deselecting a replay test that could read lr_0.004 (it does not, but nobody can know): kept.
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--tracekit-unused=delete",
                                          "-k", "not 0.001")
    result.assert_outcomes(passed=3)
    assert result.ret == 0 and (project.path / "goldens" / "lr_0.004.h5").exists()
    result.stdout.fnmatch_lines(["  not judged: goldens/lr_0.004.h5 may be unused, but not every replay test ran to "
                                 "the end (1 replay test deselected)"])
