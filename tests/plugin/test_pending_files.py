"""On a mismatch the actual trace is kept as a pending entry, CI included: the trace, its
metadata and the report, ready to upload as an artifact; --tracekit-update=all changes
nothing in CI; the next run of the test replaces what its last run left."""

from __future__ import annotations

import json

import tracekit

WRONG = """
from port import make

def test_port(tracekit_replay):
    model, step = make(activation="relu")
    tracekit_replay("seed_example", step, model=model, steps=3)
"""


def test_ci_keeps_the_pending_actual_and_never_rewrites(project, monkeypatch):
    monkeypatch.setenv("CI", "1")
    project.makepyfile(test_port=WRONG)
    before = (project.path / "goldens" / "seed_example.h5").read_bytes()
    result = project.runpytest("-p", "no:cacheprovider", "--tracekit-update=all")
    result.assert_outcomes(failed=1)
    assert (project.path / "goldens" / "seed_example.h5").read_bytes() == before
    folder = project.path / ".tracekit" / "pending"
    assert sorted(p.name for p in folder.iterdir()) == ["seed_example.h5", "seed_example.json", "seed_example.txt"]
    meta = json.loads((folder / "seed_example.json").read_text())
    assert meta["golden"] == "goldens/seed_example.h5" and meta["test"] == "test_port.py::test_port"
    assert meta["kind"] == "mismatch" and meta["headline"].startswith("step 0, tap/layer1: max abs ")
    assert "first divergence: step 0, tap/layer1 (taps)" in (folder / "seed_example.txt").read_text()
    with tracekit.open(str(folder / "seed_example.h5")) as actual:  # the replay's own trace, whole
        assert len(actual) == 3 and actual.complete
    result.stdout.fnmatch_lines([
        "*CI is set (CI=1): goldens are never rewritten in CI, whatever --tracekit-update says; keep .tracekit/pending "
        "as a build artifact and review it locally (tracekit review)",
        "next: keep .tracekit/pending as a build artifact, then review it locally: tracekit review"])


def test_the_next_run_of_the_test_replaces_its_pending_entry(project):
    project.makepyfile(test_port=WRONG)
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(failed=1)
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(failed=1)
    folder = project.path / ".tracekit" / "pending"
    assert sorted(p.name for p in folder.iterdir()) == ["seed_example.h5", "seed_example.json", "seed_example.txt"]
    # Fixed: the pass drops what the failing runs left.
    project.makepyfile(test_port=WRONG.replace('activation="relu"', "activation=None"))
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert list(folder.iterdir()) == []
