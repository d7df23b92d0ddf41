"""What one test run did with its goldens: each replay test's use of a golden (its outcome,
and the pending entry it left), and the goldens it left unused.

A golden is *unused* only when every test that owns it (the tests that wrote it, in its
provenance) was selected, ran and passed without using it. A golden whose owner was
deselected, skipped, failed, or failed to collect is kept: that test may still use it.
Goldens nobody owns (a legacy recording no test has rewritten) are never called unused.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ..errors import TracekitError
from ..store import open_trace, provenance

PASSED = "passed"  # the replay matched its golden
FAILED = "failed"  # it did not: the actual is pending
MISSING = "missing"  # no golden: nothing was compared
CREATED = "created"  # no golden: this run wrote a derived one
UPDATED = "updated"  # this run rewrote the golden
OUTCOMES = (PASSED, FAILED, MISSING, CREATED, UPDATED)


@dataclass(frozen=True)
class Use:
    """One replay test's use of one golden."""

    test: str  # pytest node id
    golden: str  # relative to the project root
    outcome: str  # one of OUTCOMES
    pending: Optional[str] = None  # the pending entry it left
    headline: str = ""  # what the comparison said, in a line

    def to_wire(self) -> Dict[str, object]:
        """As a test report's user property (crosses from pytest-xdist workers as plain data)."""
        return asdict(self)

    @classmethod
    def from_wire(cls, data: Mapping[str, object]) -> "Use":
        return cls(**{k: data.get(k) for k in ("test", "golden", "outcome", "pending", "headline")})  # type: ignore[arg-type]


@dataclass(frozen=True)
class Unused:
    golden: str  # relative to the project root
    owners: Tuple[str, ...]
    moved_to: Optional[str] = None  # where --tracekit-unused=delete put it


@dataclass
class RunSummary:
    """The run's goldens, for the summary block at its end."""

    uses: List[Use] = field(default_factory=list)
    unused: List[Unused] = field(default_factory=list)
    unreadable: List[str] = field(default_factory=list)  # goldens whose owners could not be read
    update: str = "none"  # the effective update mode
    unused_mode: str = "warn"
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
        return bool(self.uses or self.unused or self.unreadable)


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
    """(golden, owners) of each golden nobody used whose owners all passed: the rule above."""
    return [(golden, tuple(tests)) for golden, tests in sorted(owned.items())
            if golden not in used and tests and all(test in passed for test in tests)]
