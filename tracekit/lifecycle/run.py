"""What one test run did with its goldens: each replay test's use of a golden (its outcome,
and the pending entry it left), and the goldens it left unused.

A golden is *unused* only when every test that owns it (the tests that wrote it, in its
provenance) was selected, ran and passed without using it, and every other replay test of
the run ran to the end: any test that requests the fixture may read any golden, so while one
was deselected, skipped, failed before replaying, or sat in a module that failed to collect,
no golden is judged. Goldens nobody owns (a legacy recording no test has rewritten) are
never called unused: tests outside the plugin may read them.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ..errors import TracekitError
from ..store import open_trace, provenance

PASSED = "passed"  # the replay matched its golden
FAILED = "failed"  # it did not: the actual is pending
MISSING = "missing"  # no golden: nothing was compared
CREATED = "created"  # no golden: this run wrote a derived one
UPDATED = "updated"  # this run rewrote the golden


@dataclass(frozen=True)
class Use:
    """One replay test's use of one golden."""

    test: str  # pytest node id
    golden: str  # relative to the project root
    outcome: str  # PASSED, FAILED, MISSING, CREATED or UPDATED
    pending: Optional[str] = None  # the pending entry it left
    headline: str = ""  # what the comparison said, in a line
    slip: bool = False  # the report names a slip in the port (a fix, not a golden to accept)

    def to_wire(self) -> Dict[str, object]:
        """As a test report's user property (crosses from pytest-xdist workers as plain data)."""
        return asdict(self)

    @classmethod
    def from_wire(cls, data: Mapping[str, object]) -> "Use":
        return cls(**{f.name: data.get(f.name, f.default) for f in fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True)
class Unused:
    golden: str  # relative to the project root
    owners: Tuple[str, ...]
    moved_to: Optional[str] = None  # where --tracekit-unused=delete put it


@dataclass
class RunSelection:
    """Which replay tests (tests that request the fixture) a run selected, and whether any was
    left out before it ran: what decides whether unused goldens can be judged at all."""

    requesting: List[str] = field(default_factory=list)  # node ids of the selected ones
    deselected: int = 0  # deselected by -k, -m or node ids
    collection_errors: int = 0  # modules that failed to collect (their tests are unknown)
    incomplete: bool = False  # a pytest-xdist worker ended without saying what it collected
    warnings: List[str] = field(default_factory=list)  # what collection showed (plugin/kerases.py)

    def to_wire(self) -> Dict[str, object]:
        return {"requesting": list(self.requesting), "deselected": self.deselected,
                "collection_errors": self.collection_errors, "warnings": list(self.warnings)}

    @classmethod
    def from_wire(cls, data: Mapping[str, object]) -> "RunSelection":
        return cls(list(data.get("requesting") or []), int(data.get("deselected") or 0),  # type: ignore[call-overload]
                   int(data.get("collection_errors") or 0),  # type: ignore[call-overload]
                   warnings=[str(w) for w in data.get("warnings") or []])  # type: ignore[attr-defined]

    def merge(self, other: Optional["RunSelection"]) -> None:
        """Add a pytest-xdist worker's (None: it reported nothing). Every worker collects every
        test, so their selections are the same: the union guards against one that differs."""
        if other is None:
            self.incomplete = True
            return
        self.requesting = sorted(set(self.requesting) | set(other.requesting))
        self.deselected = max(self.deselected, other.deselected)
        self.collection_errors = max(self.collection_errors, other.collection_errors)
        self.warnings += [w for w in other.warnings if w not in self.warnings]

    def not_run(self, accounted: Set[str]) -> List[str]:
        """Why replay tests did not all run to the end (none: they did). `accounted`: the tests
        that passed or reached a replay."""
        left = [test for test in self.requesting if test not in accounted]
        reasons = ["%d replay test%s deselected" % (self.deselected, "s" * (self.deselected != 1))] * bool(self.deselected)
        if self.collection_errors:
            reasons.append("%d module%s failed to collect" % (self.collection_errors, "s" * (self.collection_errors != 1)))
        if left:
            reasons.append("%d replay test%s skipped or failed before replaying" % (len(left), "s" * (len(left) != 1)))
        if self.incomplete:
            reasons.append("a pytest-xdist worker ended without reporting")
        return reasons


@dataclass
class RunSummary:
    """The run's goldens, for the summary block at its end."""

    uses: List[Use] = field(default_factory=list)
    unused: List[Unused] = field(default_factory=list)
    unreadable: List[str] = field(default_factory=list)  # goldens whose owners could not be read
    possibly_unused: List[str] = field(default_factory=list)  # unused but for the tests that did not run
    unjudged: List[str] = field(default_factory=list)  # why unused goldens were not judged (RunSelection.not_run)
    problems: List[str] = field(default_factory=list)  # what could not be done (a golden that did not move)
    warnings: List[str] = field(default_factory=list)  # what collection showed (RunSelection.warnings)
    ci: bool = False
    pending_dir: str = ".tracekit/pending"

    def count(self, outcome: str) -> int:
        return sum(1 for use in self.uses if use.outcome == outcome)

    @property
    def pending(self) -> List[Use]:
        return [use for use in self.uses if use.pending]

    @property
    def active(self) -> bool:
        """Anything to report: a replay ran, or a golden is unused."""
        return bool(self.uses or self.unused or self.unreadable or self.possibly_unused or self.problems or
                    self.warnings)


def golden_files(directory: str) -> List[str]:
    """Every golden (*.h5) under `directory`, hidden files and folders left out."""
    found = []
    for folder, subdirs, files in os.walk(directory):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        found.extend(os.path.join(folder, f) for f in sorted(files) if f.endswith(".h5") and not f.startswith("."))
    return found


def owners(paths: Iterable[str]) -> Tuple[Dict[str, List[str]], List[str]]:
    """{path: the tests that own it} from each golden's provenance, and the paths that could
    not be read (damaged, or not traces)."""
    found, unreadable = {}, []
    for path in paths:
        try:
            with open_trace(path) as trace:
                found[path] = provenance.read(trace.meta, trace.created).owners
        except (TracekitError, OSError):
            unreadable.append(path)
    return found, unreadable


def find_unused(owned: Mapping[str, Sequence[str]], used: Set[str], passed: Set[str]) -> List[Tuple[str, Tuple[str, ...]]]:
    """(golden, owners) of each golden nobody used whose owners all passed: the owners' half of
    the rule above (RunSelection.not_run is the other)."""
    return [(golden, tuple(tests)) for golden, tests in sorted(owned.items())
            if golden not in used and tests and all(test in passed for test in tests)]
