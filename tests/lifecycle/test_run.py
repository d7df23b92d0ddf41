"""Which goldens a run left unused: only those whose owning tests all passed without using them."""

from __future__ import annotations

from tracekit.lifecycle.run import find_unused, golden_files, owners
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
