"""Which goldens a run left unused: only those whose owning tests all passed without using them."""

from __future__ import annotations

from tracekit.lifecycle.run import RunSelection, find_unused, golden_files, owners
from tracekit.lifecycle.update import write_golden
from tracekit.lifecycle.workspace import Workspace

from ..support.lifecycle import legacy_golden, replayed


def test_the_unused_rule():
    owned = {"g/a.h5": ["t::a"], "g/b.h5": ["t::b"], "g/c.h5": ["t::c1", "t::c2"], "g/legacy.h5": [],
             "g/d.h5": ["t::d"]}
    used = {"g/a.h5"}
    passed = {"t::a", "t::b", "t::c1", "t::d"}
    # a: used. b: its owner passed without it: unused. c: one owner (c2) did not pass (deselected, skipped,
    # failed): kept. legacy: nobody owns it: kept. d: unused.
    assert find_unused(owned, used, passed) == [("g/b.h5", ("t::b",)), ("g/d.h5", ("t::d",))]
    assert find_unused(owned, used | {"g/b.h5", "g/d.h5"}, passed) == []
    assert find_unused(owned, set(), set()) == []  # nothing ran: nothing is unused


def test_owners_come_from_the_goldens_provenance(tmp_path):
    goldens = tmp_path / "goldens"
    (goldens / "sub").mkdir(parents=True)
    (goldens / ".hidden").mkdir()
    legacy = legacy_golden(str(goldens / "legacy.h5"))
    derived = str(goldens / "sub" / "derived.h5")
    write_golden(replayed(str(tmp_path / "a.h5")), derived, Workspace(str(tmp_path)), by="x", test="t::x")
    legacy_golden(str(goldens / ".hidden" / "skip.h5"))
    (goldens / "junk.h5").write_bytes(b"not a golden")
    files = golden_files(str(goldens))
    assert files == [str(goldens / "junk.h5"), legacy, derived]
    found, unreadable = owners(files)
    assert found == {legacy: [], derived: ["t::x"]} and unreadable == [str(goldens / "junk.h5")]


def test_a_selection_says_which_replay_tests_did_not_run_to_the_end():
    selection = RunSelection(["t::a", "t::b", "t::c"])
    assert selection.not_run({"t::a", "t::b", "t::c"}) == []
    assert selection.not_run({"t::a"}) == ["2 replay tests skipped or failed before replaying"]
    # pytest-xdist: each worker collected the same tests; one that says nothing makes it incomplete.
    selection.merge(RunSelection.from_wire(RunSelection(["t::a", "t::d"], deselected=1).to_wire()))
    assert selection.requesting == ["t::a", "t::b", "t::c", "t::d"]
    assert selection.not_run({"t::a", "t::b", "t::c", "t::d"}) == ["1 replay test deselected"]
    selection.merge(None)
    selection.collection_errors = 2
    assert selection.not_run({"t::a", "t::b", "t::c", "t::d"}) == [
        "1 replay test deselected", "2 modules failed to collect", "a pytest-xdist worker ended without reporting"]
