"""Text for the golden lifecycle: a golden's origin and history (`tracekit log`), the pending
actuals (`tracekit pending`, `review`), and the summary block that ends a test run."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..comparison.envdiff import numerics
from ..keys import step_label
from ..lifecycle.pending import NEW, Pending
from ..lifecycle.run import CREATED, FAILED, MISSING, PASSED, UPDATED, RunSummary
from ..store.provenance import Provenance, Recording, Update
from .environment import summary
from .text import table


def _machine(environment: Dict[str, Any], tensorflow: Any) -> str:
    tf = tensorflow if isinstance(tensorflow, dict) else {"version": tensorflow}
    return summary(numerics({"environment": environment, "tensorflow": tf}))


def _recording(rec: Recording) -> str:
    return "recorded %s on %s" % (rec.date, _machine(rec.environment, rec.tensorflow))


def origin_line(prov: Provenance, path: Optional[str] = None) -> str:
    """Where the golden's data comes from, in a line (show, reports; with `path`, how to see more)."""
    if not prov.derived:
        return "legacy recording" + ("" if prov.recording is None else ", " + _recording(prov.recording))
    last = prov.last
    when = "" if last is None else " (%s %s%s)" % (
        "created" if last.created else "updated", last.date, ": %s" % last.reason if last.reason else "")
    lost = "" if prov.recording is None else "; the legacy recording it replaced is in its history"
    more = "" if path is None else " (tracekit log %s)" % path
    return "DERIVED: its data comes from a TF2 run%s, not from the legacy code%s%s" % (when, lost, more)


def log_lines(path: str, prov: Provenance) -> List[str]:
    """`tracekit log GOLDEN`: the original recording, then each update with its drift."""
    lines = ["golden   %s" % path, "origin   %s" % origin_line(prov)]
    if prov.owners:
        lines.append("owners   %s" % ", ".join(prov.owners))
    if not prov.stored:
        lines.append("(written before tracekit kept provenance: the recording's details are the file's own)")
    if prov.recording is not None:
        rec = prov.recording
        lines.append("")
        lines.append("recorded %s" % rec.date)
        lines.append("  on       %s" % _machine(rec.environment, rec.tensorflow))
        if rec.command:
            lines.append("  command  %s" % rec.command)
        if rec.cwd:
            lines.append("  in       %s" % rec.cwd)
    elif prov.updates:
        lines.append("")
        lines.append("no legacy recording: the golden began as a TF2 run")
    for number, update in enumerate(prov.updates, 1):
        lines.append("")
        lines += _update_lines(number, update)
    return lines


def _update_lines(number: int, update: Update) -> List[str]:
    lines = ["%s %d  %s, by %s" % ("created" if update.created else "update", number, update.date, update.by)]
    if update.test:
        lines.append("  test     %s" % update.test)
    lines.append("  reason   %s" % (update.reason or "(none given)"))
    lines.append("  on       %s (tracekit %s)" % (_machine(update.environment, update.tensorflow), update.tracekit))
    if update.steps is not None:
        lines.append("  steps    %d" % update.steps)
    if update.replaced:
        lines.append("  kept     the replaced %s golden at %s" % (
            "legacy-recorded" if update.replaced_origin == "recorded" else "derived", update.replaced))
    elif not update.created:
        lines.append("  kept     the replaced golden was not kept")
    if update.drift:
        rows = [[d.kind, "%d/%d" % (d.changed, d.tensors), "%.3g" % d.max_abs, "%.3g" % d.max_rel,
                 "-" if d.first_step is None else step_label(d.first_step)] for d in update.drift]
        lines.append("  drift against the golden it replaced (bit for bit):")
        lines += ["    " + line for line in table(["kind", "changed", "max abs", "max rel", "first change"], rows,
                                                   right=(1, 2, 3))]
    return lines


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
            "test     %s (%s)" % (entry.test or "-", entry.date),
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
    for path in run.unreadable:
        lines.append("  unreadable %s: not checked for use (tracekit verify %s)" % (path, path))
    lines += ["next: " + step for step in _next(run)]
    return lines


def _next(run: RunSummary) -> List[str]:
    steps = []
    if run.pending:
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
