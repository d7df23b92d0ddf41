"""Text for a Comparison: verdict, first divergence with its numbers, per-tensor table."""

from __future__ import annotations

from typing import List

from ..compare.engine import Comparison, Divergence
from ..compare.stats import Stats
from ..store.format import step_label
from .text import table

STAGES = {"input": "inputs", "random": "random draws", "tap": "taps", "fetch": "fetches", "loss": "loss",
          "lr": "learning rate", "grad": "gradients", "var": "updated variables", "slot": "optimizer slots"}


def _num(x: float) -> str:
    return "%.3g" % x


def describe(stats: Stats) -> List[str]:
    """Lines saying how a tensor differs."""
    if stats.problem:
        return [stats.problem]
    lines = ["%d of %d elements differ (%.1f%%); max abs error %s, max rel error %s%s"
             % (stats.mismatched, stats.total, 100 * stats.fraction, _num(stats.max_abs), _num(stats.max_rel),
                "" if stats.worst_index is None else ", worst at %s" % (list(stats.worst_index),))]
    if stats.nonfinite:
        lines.append("%d elements are NaN or Inf on one side only (always a mismatch)" % stats.nonfinite)
    lines.append("tolerance atol=%s rtol=%s; it would pass with atol >= %s (at rtol=%s) or rtol >= %s (at atol=%s)"
                 % (_num(stats.atol), _num(stats.rtol), _num(stats.needed_atol), _num(stats.rtol),
                    _num(stats.needed_rtol), _num(stats.atol)))
    return lines


def divergence(d: Divergence) -> List[str]:
    lines = ["first divergence: %s, %s (%s)" % (step_label(d.step), d.key, STAGES.get(d.kind, d.kind))]
    lines += ["  " + line for line in describe(d.stats)]
    if d.noise_floor:
        lines.append("  this gradient is at the noise floor: its golden values (up to %s) are round-off, far "
                     "below the step's other gradients; an optimizer that divides by sqrt(v) (Adam) turns such "
                     "noise into full-size updates. This is not a porting error: accept it with a rule, e.g. "
                     "[[rule]] kind='grad' name='%s' ignore=true (and its variable), or drop the bias before "
                     "batch norm (use_bias=False)" % (_num(d.stats.golden_scale), d.name))
    return lines


def render(result: Comparison) -> str:
    verdict = "MATCH" if result.ok else "MISMATCH"
    lines = ["%s  %s vs golden %s: %d steps compared, %d tensors" % (
        verdict, result.actual, result.golden, result.steps, len(result.tensors))]
    lines += ["note: " + note for note in result.notes]
    if result.short is not None:
        lines.append("the replay is short: %s; replay every step (or pass steps=N to replay fewer on purpose)"
                     % result.short)
    if result.first_divergence is not None:
        lines += divergence(result.first_divergence)
    if result.missing:
        lines.append("missing from the replay (%d): %s" % (len(result.missing), ", ".join(result.missing[:12])
                                                            + (" ..." if len(result.missing) > 12 else "")))
    rows = []
    for t in result.tensors:
        w = t.worst
        rows.append([t.kind, t.name, "ok" if t.ok else "FAIL%s" % (" (noise floor)" if t.noise_floor else ""),
                     "%d/%d" % (t.failed_steps, t.steps), "-" if t.first_failed is None else step_label(t.first_failed),
                     "%.1f%%" % (100 * w.fraction), _num(w.max_abs), _num(w.max_rel), _num(w.needed_atol),
                     _num(w.needed_rtol)])
    failing = [r for r in rows if r[2] != "ok"]
    shown = failing if failing else rows
    if shown:
        lines.append("")
        lines.append("%s (worst step of each):" % ("failing tensors" if failing else "tensors"))
        lines += table(["kind", "name", "result", "failed", "first", "differ", "max abs", "max rel", "need atol",
                        "need rtol"], shown[:60], right=(3, 5, 6, 7, 8, 9))
        if len(shown) > 60:
            lines.append("... and %d more" % (len(shown) - 60))
    if result.not_compared:
        reasons = {}  # type: dict
        for key, why in result.not_compared.items():
            reasons.setdefault(why, []).append(key)
        lines.append("")
        for why, keys in sorted(reasons.items()):
            lines.append("not compared, %s: %s" % (why, ", ".join(sorted(keys)[:8]) + (" ..." if len(keys) > 8 else "")))
    return "\n".join(lines)


def max_errors(result: Comparison) -> List[List[str]]:
    """Largest error per kind: rows of (kind, tensors, max abs, max rel)."""
    by_kind = {}  # type: dict
    for t in result.tensors:
        row = by_kind.setdefault(t.kind, [t.kind, 0, 0.0, 0.0])
        row[1] += 1
        row[2] = max(row[2], t.worst.max_abs)
        row[3] = max(row[3], t.worst.max_rel if t.worst.max_rel != float("inf") else row[3])
    return [[k, str(n), _num(a), _num(r)] for k, n, a, r in by_kind.values()]
