"""Pending actuals: the trace of a replay that differed from its golden (or of a TF2 run that
would create a missing one), kept with what the comparison said, until someone accepts it
as the new golden or rejects it.

An entry is three files under .tracekit/pending/: NAME.h5 (the trace), NAME.json (what it
is: the golden, the test, the verdict; written first, with O_EXCL, so concurrent test
processes never share a name) and NAME.txt (the comparison's report). When a test replays a
golden again, the entries its earlier runs left for that golden are dropped.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from typing import List, Optional

from ..errors import UsageError
from ..store.provenance import utc_now
from ..store.remote import refuse_url
from . import atomic
from .update import Written, write_locked
from .workspace import Workspace

MISMATCH = "mismatch"  # the golden exists and the replay differs from it
NEW = "new"  # no golden: this run would create it


@dataclass(frozen=True)
class Pending:
    name: str
    golden: str  # the golden it would replace or create: relative to the project root, or absolute
    kind: str  # MISMATCH or NEW
    headline: str  # the verdict in a line: the first divergence
    test: Optional[str] = None  # the pytest node id
    date: str = ""
    run: Optional[str] = None  # the test run that kept it
    tolerance: Optional[str] = None
    directory: str = ""  # the pending directory (not stored)

    @property
    def trace(self) -> str:
        return os.path.join(self.directory, self.name + ".h5")

    @property
    def report_path(self) -> str:
        return os.path.join(self.directory, self.name + ".txt")

    @property
    def meta_path(self) -> str:
        return os.path.join(self.directory, self.name + ".json")

    def report(self) -> str:
        try:
            with open(self.report_path, encoding="utf-8") as fh:
                return fh.read()
        except OSError:
            return self.headline


def keep(workspace: Workspace, name: str, actual: str, *, golden: str, kind: str, headline: str, report: str,
         test: Optional[str] = None, run: Optional[str] = None, tolerance: Optional[str] = None) -> Pending:
    """Keep the trace at `actual` as pending NAME (NAME~2, ... while NAME is taken)."""
    directory = workspace.ensure("pending")
    entry = Pending(name, workspace.relative(golden), kind, headline, test, utc_now(), run, tolerance, directory)
    entry = _claim(entry)
    with open(entry.report_path, "w", encoding="utf-8") as fh:
        fh.write(report.rstrip("\n") + "\n")
    atomic.copy(actual, entry.trace)  # last: an entry is complete once its trace is there
    return entry


def _claim(entry: Pending) -> Pending:
    """Create NAME.json exclusively, trying NAME~2, NAME~3, ... while the name is taken."""
    base, n = entry.name, 1
    while True:
        name = base if n == 1 else "%s~%d" % (base, n)
        candidate = Pending(**dict(_stored(entry), name=name, directory=entry.directory))
        os.makedirs(os.path.dirname(candidate.meta_path), exist_ok=True)
        try:
            fd = os.open(candidate.meta_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            n += 1
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(_stored(candidate), fh, indent=2, sort_keys=True)
        return candidate


def _stored(entry: Pending) -> dict:
    data = asdict(entry)
    data.pop("directory")
    return data


def clear_stale(workspace: Workspace, golden: str, test: Optional[str], run: Optional[str]) -> int:
    """Remove the entries that earlier runs of `test` kept for `golden` (this run's verdict
    supersedes them); returns how many."""
    target = workspace.relative(golden)
    stale = [e for e in entries(workspace, complete=False) if e.golden == target and e.test == test and e.run != run]
    if stale:
        with atomic.locked(workspace.lock_dir(target)):  # not while one is being accepted
            for entry in stale:
                remove(entry)
    return len(stale)


def entries(workspace: Workspace, complete: bool = True) -> List[Pending]:
    """The pending entries, by name; with `complete`, only those whose trace is written."""
    found = []
    if not os.path.isdir(workspace.pending):
        return found
    for folder, _, files in os.walk(workspace.pending):
        for file in files:
            if not file.endswith(".json"):
                continue
            path = os.path.join(folder, file)
            entry = _load(path, workspace.pending)
            if entry is not None and (not complete or os.path.exists(entry.trace)):
                found.append(entry)
    return sorted(found, key=lambda e: e.name)


def _load(path: str, directory: str) -> Optional[Pending]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None  # being written, or not ours
    known = {f.name for f in fields(Pending)} - {"directory"}
    if not isinstance(data, dict) or not {"name", "golden", "kind", "headline"} <= set(data):
        return None
    name = os.path.relpath(path, directory)[:-len(".json")].replace(os.sep, "/")
    return Pending(**dict({k: v for k, v in data.items() if k in known}, name=name, directory=directory))


def find(workspace: Workspace, what: str) -> Pending:
    """The entry named `what`, or whose trace, report or metadata file is at the path `what`, or
    the one entry for the golden at the path `what`."""
    every = entries(workspace)
    absolute = os.path.abspath(what)
    for entry in every:
        if what == entry.name or absolute in (entry.trace, entry.meta_path, entry.report_path):
            return entry
    for_golden = [e for e in every if workspace.resolve(e.golden) == absolute]
    if len(for_golden) == 1:
        return for_golden[0]
    if for_golden:
        raise UsageError("%d pending actuals for %s (%s): name the one to take"
                         % (len(for_golden), what, ", ".join(e.name for e in for_golden)))
    names = ", ".join(e.name for e in every) or "none"
    raise UsageError("no pending actual %s in %s (pending: %s); tracekit pending lists them"
                     % (what, workspace.pending, names))


def one_per_golden(chosen: List[Pending]) -> None:
    """Refuse to accept several entries for one golden at once: the last would silently win."""
    by_golden: dict = {}
    for entry in chosen:
        by_golden.setdefault(entry.golden, []).append(entry.name)
    twice = ["%s (%s)" % (golden, ", ".join(names)) for golden, names in sorted(by_golden.items()) if len(names) > 1]
    if twice:
        raise UsageError("several pending actuals for one golden: %s; accept one of each by name (tracekit review "
                         "shows them), reject the others" % "; ".join(twice))


def accept(workspace: Workspace, entry: Pending, reason: Optional[str] = None, keep_replaced: bool = True,
           by: str = "tracekit accept") -> Written:
    """Make the entry's trace its golden (update.write_golden), then drop the entry; one
    process at a time per goldens directory, and an entry is accepted once, as it was listed."""
    golden = workspace.resolve(entry.golden)
    refuse_url(golden, "write a golden")
    with atomic.locked(workspace.lock_dir(golden)):
        _still(entry)
        written = write_locked(entry.trace, golden, workspace, by=by, reason=reason, test=entry.test,
                               keep=keep_replaced)
        remove(entry)
    return written


def reject(workspace: Workspace, entry: Pending) -> None:
    """Drop the entry: its golden stays as it is."""
    with atomic.locked(workspace.lock_dir(entry.golden)):
        _still(entry)
        remove(entry)


def _still(entry: Pending) -> None:
    """The entry is still there, as it was when listed (a test run may have replaced it since)."""
    now = _load(entry.meta_path, entry.directory) if os.path.exists(entry.meta_path) else None
    if now is None or not os.path.exists(entry.trace):
        raise UsageError("pending %s is gone: another process accepted or rejected it" % entry.name)
    if (now.run, now.date, now.test) != (entry.run, entry.date, entry.test):
        raise UsageError("pending %s was replaced by a newer test run since it was listed; look at it again "
                         "(tracekit review)" % entry.name)


def remove(entry: Pending) -> None:
    for path in (entry.trace, entry.report_path, entry.meta_path):  # the metadata last: it names the entry
        atomic.discard(path)
