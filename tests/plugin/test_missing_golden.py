"""A missing golden: the failure names its path and the two ways to create it; with data= the
TF2 run is kept pending (or written by --tracekit-update=new); in CI nothing is ever created."""

from __future__ import annotations

import os

import tracekit
from tracekit.lifecycle import pending
from tracekit.lifecycle.workspace import Workspace
from tracekit.store import provenance

NO_DATA = """
from port import make

def test_port(tracekit_replay):
    model, step = make()
    tracekit_replay("new_model", step, model=model)
"""

WITH_DATA = """
from port import DATA, make

def test_port(tracekit_replay):
    model, step = make()
    tracekit_replay("new_model", step, model=model, data=DATA)
"""


def test_the_failure_names_the_path_and_both_ways_to_create_it(project):
    project.makepyfile(test_port=NO_DATA)
    result = project.runpytest("-p", "no:cacheprovider", "--tracekit-update=new")
    result.assert_outcomes(failed=1)
    path = os.path.join(str(project.path), "goldens", "new_model.h5")
    result.stdout.fnmatch_lines([
        "golden goldens/new_model.h5 does not exist. Create it either way:",
        "  1. record it on the legacy environment: tracekit record -o %s -- YOUR_TF1_SCRIPT.py [ARGS]" % path,
        "  2. or make a derived golden from this TF2 run: pass data=* to tracekit_replay and run pytest "
        "--tracekit-update=new",
        "replays: 0 passed, 0 failed, 1 missing, 0 created, 0 updated; 0 pending, 0 unused",
        "next: record the missing goldens on the legacy environment*"])
    assert not os.path.exists(path)


def test_with_data_the_run_is_pending_until_accepted(project):
    project.makepyfile(test_port=WITH_DATA)
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["This run on data= is kept as pending new_model: accept it with tracekit accept "
                                 "new_model"])
    workspace = Workspace(str(project.path))
    [entry] = pending.entries(workspace)
    assert entry.kind == pending.NEW and entry.golden == "goldens/new_model.h5"
    written = pending.accept(workspace, entry, reason="first TF2 golden")
    assert written.created
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_new_creates_a_derived_golden_owned_by_its_test(project):
    project.makepyfile(test_port=WITH_DATA)
    result = project.runpytest("-p", "no:cacheprovider", "--tracekit-update=new", "--tracekit-reason", "no TF1 code")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*0 missing, 1 created*", "  created  goldens/new_model.h5 (test_port.py::test_port): "
                                 "created from 3 steps of data"])
    with tracekit.open(str(project.path / "goldens" / "new_model.h5")) as trace:
        prov = provenance.read(trace.meta, trace.created)
        assert len(trace) == 3 and {t.kind for t in trace.catalog} >= {"input", "tap", "loss", "grad", "var"}
    assert prov.derived and prov.recording is None and prov.owners == ["test_port.py::test_port"]
    assert prov.updates[0].created and prov.updates[0].reason == "no TF1 code"
    # The same port replays it; the next run passes without creating anything.
    result = project.runpytest("-p", "no:cacheprovider", "--tracekit-update=new")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["replays: 1 passed, 0 failed, 0 missing, 0 created, 0 updated*"])


def test_in_ci_nothing_is_created_whatever_the_flags(project, monkeypatch):
    monkeypatch.setenv("CI", "true")
    project.makepyfile(test_port=WITH_DATA)
    result = project.runpytest("-p", "no:cacheprovider", "--tracekit-update=new")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "tracekit: goldens goldens, update new, unused fail (CI is set: no golden is created, rewritten or deleted)",
        "CI is set (CI=true): goldens are never created in CI, whatever --tracekit-update says; create it locally and "
        "commit it",
        "This run on data= is kept as pending new_model*",
        "CI is set: no golden was created or rewritten, whatever the flags"])
    assert not (project.path / "goldens" / "new_model.h5").exists()
    assert (project.path / ".tracekit" / "pending" / "new_model.h5").exists()
