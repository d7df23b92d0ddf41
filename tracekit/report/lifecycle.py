"""Text for the golden lifecycle: the pending actuals (`tracekit pending`, `review`) and the
summary block that ends a test run."""

from __future__ import annotations

from typing import List

from ..lifecycle.pending import NEW, Pending
from ..lifecycle.run import CREATED, FAILED, MISSING, PASSED, UPDATED, RunSummary
from .text import table


def pending_lines(entries: List[Pending]) -> List[str]:
    """`tracekit pending`: one row per entry."""
    if not entries:
        return ["no pending actuals"]
    rows = [[e.name, "new golden" if e.kind == NEW else "mismatch", e.golden, e.test or "-", e.headline]
            for e in entries]
    return table(["name", "kind", "golden", "test", "verdict"], rows)


def entry_lines(entry: Pending) -> List[str]:
    """One entry in full, for review: what it is, then the comparison's report."""
    what = "would create" if entry.kind == NEW else "differs from"
    return ["pending  %s: %s %s" % (entry.name, what, entry.golden),
            "test     %s (%s%s)" % (entry.test or "-", entry.date,
                                      ", tolerance %s" % entry.tolerance if entry.tolerance else ""),
            "trace    %s" % entry.trace, ""] + entry.report().rstrip("\n").splitlines()


def summary_lines(run: RunSummary) -> List[str]:
    """The block that ends a test run: counts, what needs attention, and the next command."""
    counts = ", ".join("%d %s" % (run.count(o), o) for o in (PASSED, FAILED, MISSING, CREATED, UPDATED))
    lines = ["replays: %s; %d pending, %d unused" % (counts, len(run.pending), len(run.unused))]
    if run.ci:
        lines.append("CI is set: no golden was created or rewritten, whatever the flags")
    for use in run.uses:
        if use.outcome == PASSED:
            continue
        pending = "; pending %s" % use.pending if use.pending else ""
        lines.append("  %-8s %s (%s)%s%s" % (use.outcome, use.golden, use.test,
                                              ": " + use.headline if use.headline else "", pending))
    for unused in run.unused:
        where = "; moved to %s" % unused.moved_to if unused.moved_to else ""
        lines.append("  unused   %s (owned by %s, which passed without using it)%s"
                     % (unused.golden, ", ".join(unused.owners), where))
    if run.possibly_unused:
        lines.append("  not judged: %s may be unused, but not every replay test ran to the end (%s)"
                     % (", ".join(run.possibly_unused), "; ".join(run.unjudged)))
    for path in run.unreadable:
        lines.append("  unreadable %s: not checked for use (tracekit verify %s)" % (path, path))
    lines += ["  " + problem for problem in run.problems]
    lines += ["  WARNING " + warning for warning in run.warnings]
    lines += ["next: " + step for step in _next(run)]
    return lines


def _next(run: RunSummary) -> List[str]:
    steps = []
    slips = [use for use in run.pending if use.slip]
    if slips:
        steps.append("fix the port%s whose report names a slip (%s), then rerun: a named slip is the port's, not a "
                     "change to accept" % ("s" * (len(slips) > 1), ", ".join(use.test for use in slips)))
    if len(slips) < len(run.pending):
        if run.ci:
            steps.append("keep %s as a build artifact, then review it locally: tracekit review" % run.pending_dir)
        else:
            steps.append("tracekit review (or tracekit accept NAME --reason ..., tracekit accept --all), or rerun "
                         "with --tracekit-update=all --tracekit-reason ... to rewrite every failing golden")
    if run.count(MISSING):
        steps.append("record the missing goldens on the legacy environment (tracekit record -o GOLDEN -- script.py), "
                     "or make derived ones from the TF2 run: pass data= and run with --tracekit-update=new"
                     + (" (not in CI)" if run.ci else ""))
    if run.unused and not any(u.moved_to for u in run.unused):
        steps.append("remove the unused goldens: --tracekit-unused=delete moves them to .tracekit/history"
                     + (" (not in CI)" if run.ci else ""))
    return steps
