"""Text for provenance: where a golden's data came from, in a line (show, every comparison
report) and in full (`tracekit log`): the legacy recording, then each update and its drift."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..comparison.envdiff import numerics
from ..keys import step_label
from ..store.provenance import RECORDED, Provenance, Recording, Revision
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
    replaced = next((u for u in prov.updates if u.replaced_origin == RECORDED), None)
    legacy = "" if replaced is None else "; the legacy recording it replaced %s" % (
        "is kept at %s" % replaced.replaced if replaced.replaced else "was not kept")
    more = "" if path is None else " (tracekit log %s)" % path
    return "DERIVED: its data comes from a TF2 run%s, not from the legacy code%s%s" % (when, legacy, more)


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


def _update_lines(number: int, update: Revision) -> List[str]:
    lines = ["%s %d  %s, by %s" % ("created" if update.created else "update", number, update.date, update.by)]
    if update.test:
        lines.append("  test     %s" % update.test)
    lines.append("  reason   %s" % (update.reason or "(none given)"))
    lines.append("  on       %s (tracekit %s)" % (_machine(update.environment, update.tensorflow), update.tracekit))
    if update.steps is not None:
        lines.append("  steps    %d" % update.steps)
    if update.replaced:
        lines.append("  kept     the replaced %s golden at %s" % (
            "legacy-recorded" if update.replaced_origin == RECORDED else "derived", update.replaced))
    elif not update.created:
        lines.append("  kept     the replaced golden was not kept")
    if update.initial_kept:
        kinds = sorted({key.split("/", 1)[0] for key in update.initial_kept})
        lines.append("  initial  %d %s kept from the replaced golden (made by the TF2 run only at its first step, "
                     "which started from them)" % (len(update.initial_kept), "/".join(kinds)))
    if update.drift:
        rows = [[d.kind, "%d/%d" % (d.changed, d.tensors), "%.3g" % d.max_abs, "%.3g" % d.max_rel,
                 "-" if d.first_step is None else step_label(d.first_step)] for d in update.drift]
        lines.append("  drift against the golden it replaced (bit for bit):")
        lines += ["    " + line for line in table(["kind", "changed", "max abs", "max rel", "first change"], rows,
                                                   right=(1, 2, 3))]
    return lines
