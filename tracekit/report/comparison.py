"""Text for a Comparison: verdict, first divergence with its numbers, per-tensor table."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..comparison.distribution import (BATCH_NORM, LOSS_PER_REPLICA, NOT_REDUCED, REDUCED_TWICE,
                                       REGULARIZATION_UNSCALED, DistributionHint)
from ..comparison.result import Comparison, Divergence, RoundoffCause, TensorResult
from ..comparison.noise import DRIVEN, GRADIENT, UPDATE, Noise
from ..comparison.select import Selection
from ..comparison.stats import Stats
from ..keys import step_label
from .environment import changes, diff_lines, summary
from .fingerprints import fingerprint
from .hints import convention, slip
from .judged import judged_lines
from .provenance import origin_line
from .sources import divergence_source, fingerprint_lines
from .text import num, table

STAGES = {"input": "inputs", "random": "random draws", "tap": "taps", "fetch": "fetches", "loss": "loss",
          "lr": "learning rate", "grad": "gradients", "var": "updated variables", "slot": "optimizer slots"}



def form_lines(result: Comparison) -> List[str]:
    """Which tensors the two sides hold in other forms (a sparse gradient), and how they were compared."""
    formed = [t for t in result.tensors if t.form]
    if not formed:
        return []
    return ["compared in another form (%d): %s" % (len(formed), "; ".join("%s %s" % (t.key, t.form)
                                                                          for t in formed[:6]))
            + (" ..." if len(formed) > 6 else "")]

def digest_lines(result: Comparison) -> List[str]:
    """How many verdicts came from digests (the golden keeps none of those values at those steps)."""
    digested = [t for t in result.tensors if t.digest_steps]
    if not digested:
        return []
    return ["judged from digests (a fixed sample and the statistics, or equal bytes) where the golden keeps no "
            "values: %d tensors, %d tensor-steps of %d" % (len(digested), sum(t.digest_steps for t in digested),
                                                           sum(t.steps for t in result.tensors))]


def describe(stats: Stats) -> List[str]:
    """Lines saying how a tensor differs."""
    if stats.basis in ("digest", "bits"):
        return _from_digest(stats)
    if stats.problem:
        return [stats.problem]
    if stats.discrete:
        apart = ", at most %s apart" % _whole(stats.max_abs) if stats.max_abs else ""
        return ["%d of %d elements differ (%.1f%%)%s%s; compared exactly (integers, booleans, strings: no tolerance "
                "applies, and round-off never explains them)"
                % (stats.mismatched, stats.total, 100 * stats.fraction, apart,
                   "" if stats.worst_index is None else ", first at %s" % (list(stats.worst_index),))]
    lines = ["%d of %d elements differ (%.1f%%); max abs error %s, max rel error %s%s"
             % (stats.mismatched, stats.total, 100 * stats.fraction, num(stats.max_abs), num(stats.max_rel),
                "" if stats.worst_index is None else ", worst at %s" % (list(stats.worst_index),))]
    if stats.nonfinite:
        lines.append("%d elements are NaN or Inf on one side only (always a mismatch)" % stats.nonfinite)
    allowance = " ulps=%s" % num(stats.allowed_ulps) if stats.allowed_ulps else ""
    lines.append("tolerance atol=%s rtol=%s%s; it would pass with atol >= %s (at rtol=%s) or rtol >= %s (at atol=%s)"
                 % (num(stats.atol), num(stats.rtol), allowance, num(stats.needed_atol), num(stats.rtol),
                    num(stats.needed_rtol), num(stats.atol)))
    if 0 < stats.ulps < float("inf"):
        lines.append("error = %s ulps of the tensor's scale (eps * max |golden| = %s)"
                     % (num(stats.ulps), num(stats.max_abs / stats.ulps)))
    return lines


def _whole(distance: float) -> str:
    """An integer distance as an integer (float keeps integers exact up to 2**53)."""
    return "%d" % distance if distance.is_integer() and abs(distance) < 2 ** 53 else num(distance)


def _from_digest(stats: Stats) -> List[str]:
    """describe() of a verdict the digests made: what the sample and the statistics showed."""
    if stats.basis == "bits":
        return ["judged from digests: the same bytes (crc32)"]
    lines = ["judged from digests (the golden keeps a fixed sample and statistics of the %d elements at this "
             "step): %d sampled elements differ; max abs error at least %s%s"
             % (stats.total, stats.mismatched,
                num(stats.max_abs), "" if stats.worst_index is None else ", worst sampled at %s"
                % (list(stats.worst_index),))]
    if stats.problem:
        lines.append(stats.problem)
    if not stats.discrete:
        # a tensor failing only as a whole (the envelope's moments) needs no larger atol to show it
        lines.append("tolerance atol=%s rtol=%s%s%s"
                     % (num(stats.atol), num(stats.rtol), " ulps=%s" % num(stats.allowed_ulps)
                        if stats.allowed_ulps else "", "; it would need atol >= %s at least" % num(stats.needed_atol)
                        if stats.needed_atol > 0 or stats.ok else ""))
    return lines


def divergence(d: Divergence) -> List[str]:
    lines = ["first divergence: %s, %s (%s)" % (step_label(d.step), d.key, STAGES.get(d.kind, d.kind))]
    lines += ["  " + line for line in describe(d.stats)]
    if d.golden_at_worst is not None and d.actual_at_worst is not None:
        lines.append("  at %s: golden %r, actual %r" % (list(d.stats.worst_index or ()), d.golden_at_worst,
                                                        d.actual_at_worst))
    if d.noise is not None:
        lines += ["  " + noise_line(d.noise, d.stats),
                  "  this is not a porting error. Accept explained noise with Tolerance(accept_noise=True) "
                  "(Tolerance.training() does; accept_noise = true in a tolerance file), or drop the bias before "
                  "batch norm (use_bias=False)"]
    return lines


def noise_line(noise: Noise, stats: Optional[Stats] = None) -> str:
    """What amplified round-off explains, in one line (comparison/noise.py)."""
    if noise.link == GRADIENT:
        size = "" if stats is None else " (up to %s)" % num(stats.golden_scale)
        return ("%s is at the noise floor: its golden values%s are round-off, far below the step's other "
                "gradients" % (noise.key, size))
    if noise.link == UPDATE:
        return ("%s carries round-off of its update's inputs: its gradient %s and the learning rate passed, and the "
                "port's new value is what the golden's own update rule makes of them, recomputed in float64 "
                "(accepted: verified)" % (noise.key, noise.source))
    if noise.link == DRIVEN:
        return ("%s is driven by round-off: its gradient %s has been at the noise floor at every step, and an "
                "optimizer that divides by sqrt(v) (Adam, RMSprop, Adagrad) turns noise into full-size updates"
                % (noise.key, noise.source))
    return ("%s follows from %s, which round-off drives: the loss and every other gradient agree, and its error is "
            "within the tolerance plus what that variable has differed by" % (noise.key, noise.source))


def cause(c: RoundoffCause) -> List[str]:
    what = changes(c.changes)
    differ = "may differ" if all(x.unknown for x in c.changes) else "differ"
    closest = "every failing tensor is within the cross-machine round-off bound of its kind (closest: %s, " \
              "%s ulps of its scale, bound %s)" % (c.key, num(c.ulps), num(c.bound))
    if c.likely:
        return ["likely cause: the machine, not the code: %s, the same program computed both, and the two runs "
                "differ in what selects kernels (%s). Compare with the round-off profile (tracekit diff without "
                "--exact; Tolerance.roundoff()), or record the golden on this kind of machine (docs/NUMERICS.md)"
                % (closest, what)]
    if c.port:
        return ["possible cause: machine round-off. %s, and the machines %s in what selects kernels (%s). "
                "A port's own small error looks the same: if the golden's machine kind is at hand, replay there "
                "to tell them apart (docs/NUMERICS.md)" % (closest, differ, what)]
    return ["possible cause: machine round-off. %s, and the runs %s in what selects kernels (%s); the traces do "
            "not record enough to be sure (which program made them, or the machine), so a small change of the "
            "code would look the same (docs/NUMERICS.md)" % (closest, differ, what)]


SPLIT_BY = {"dataset": "strategy.experimental_distribute_dataset", "function": "strategy.distribute_datasets_from_function"}


def distribution_line(where: dict) -> str:
    """Where a replay under a strategy ran, in one line."""
    devices = [str(d).rpartition("/device:")[2] or str(d) for d in where.get("devices") or []]
    workers = int(where.get("workers") or 1)
    return ("replicas: %s (%s%s on %s; all-reduce: %s; inputs split as %s, global batch %s)"
            % (where.get("replicas"), where.get("strategy"),
               ", %d workers, this one worker %s" % (workers, where.get("worker")) if workers > 1 else "",
               ", ".join(devices) or "?", where.get("reduction"), SPLIT_BY.get(where.get("input"), where.get("input")),
               where.get("global_batch_size")))


def distribution_hint(hint: DistributionHint) -> str:
    n, at = hint.replicas, "%s, %s" % (step_label(hint.step), hint.key)
    if hint.code == LOSS_PER_REPLICA:
        return ("hint (distribution): %s is %.3g times the golden's, with %d replicas: each replica averaged its "
                "loss over its own batch. Average over the global batch: tf.nn.compute_average_loss("
                "per_example_loss, global_batch_size=...), and return strategy.reduce(SUM, ...)" % (at, hint.factor, n))
    if hint.code == REGULARIZATION_UNSCALED:
        return ("hint (distribution): at %s the loss exceeds the golden's by its regularization loss times %d "
                "(replicas - 1): each of the %d replicas added the whole of it. Scale it: "
                "tf.nn.scale_regularization_loss(tf.add_n(model.losses))" % (at, n - 1, n))
    if hint.code == REDUCED_TWICE:
        return ("hint (distribution): from %s every replica passed apply_gradients gradients that were already "
                "summed over the %d replicas, and the optimizer all-reduces them again. All-reduce once: drop the "
                "step's own all_reduce, or pass experimental_aggregate_gradients=False" % (at, n))
    if hint.code == NOT_REDUCED:
        return ("hint (distribution): from %s each replica applied its own gradients (they were not all-reduced), "
                "so the mirrored variables went apart. Let the optimizer all-reduce (the default), or all-reduce "
                "them in the step before apply_gradients(..., experimental_aggregate_gradients=False)" % at)
    if hint.code == BATCH_NORM:
        return ("hint (distribution): batch normalization (%s) computes statistics over each replica's batch, the "
                "golden over the whole global batch (%d replicas here). Use BatchNormalization(synchronized=True), "
                "or a rule for the difference (docs/DISTRIBUTE.md)" % (", ".join(hint.layers), n))
    return "hint (distribution): %s at %s" % (hint.code, at)


def forcing_line(forcing: str, forced: Optional[Dict[str, Any]] = None) -> str:
    if forcing == "state":
        line = ("forcing: state (teacher-forced: every step started from the golden's state after the step before, "
                "so each step's error is its own, the local error, not what earlier steps accumulated)")
    else:
        line = "forcing: %s" % forcing
    if not forced:
        return line
    kinds = {"var": "variables and counters", "slot": "optimizer slots"}
    what = ", ".join("%d %s" % (n, kinds.get(kind, kind)) for kind, n in sorted(forced.get("set", {}).items()))
    line += "; set and read back at step %s: %s" % (forced.get("step"), what or "nothing")
    missing = forced.get("not_set") or {}
    if missing:
        shown = ["%s (%s)" % item for item in sorted(missing.items())[:4]]
        line += "; not set, so not forced: " + "; ".join(shown) + (" and %d more" % (len(missing) - 4)
                                                                    if len(missing) > 4 else "")
    return line


def _status(t: TensorResult) -> str:
    if t.misused:
        return "MISUSED"
    if t.failed_steps:  # "(noise)": every failing step is explained, and not accepted
        unexplained = any(not s.ok and step not in t.noise for step, s in t.by_step.items())
        return "FAIL" if unexplained else "FAIL (noise)"
    if t.accepted_steps:  # accepted as noise, or (a local verdict) explained by the float64 arbiter
        return "noise ok" if t.noise else "explained"
    return "ok"


def verdict(result: Comparison) -> str:
    """MATCH / MISMATCH, and for a match what it means."""
    if not result.ok:
        return "MISMATCH"
    carried = sum(n.link == UPDATE for n in result.noise)
    if carried and carried == len(result.noise):
        return "MATCH (round-off an update carried, verified, in %d tensor(s))" % carried
    if result.noise:
        return "MATCH (explained noise accepted in %d tensor(s))" % len(result.noise)
    env = result.environment_diff
    if result.profile.name == "exact":
        return "MATCH (bit for bit)"
    if result.profile.name == "round-off":
        return "MATCH (within round-off; golden recorded on %s, actual on %s)" % (
            summary(env.golden), summary(env.actual))
    return "MATCH"


def headline(result: Comparison) -> str:
    """The verdict in one line: where the replay first departs, and by how much."""
    first = result.first_divergence
    if first is not None:
        stats = first.stats
        size = stats.problem if stats.problem else "max abs %.2g (%d of %d elements differ)" % (
            stats.max_abs, stats.mismatched, stats.total)
        return "%s, %s: %s" % (step_label(first.step), first.key, size)
    if result.missing:
        return "missing from the replay: %s" % ", ".join(result.missing[:3]) + (" ..." if len(result.missing) > 3 else "")
    if result.short is not None:
        return "the replay is short: %s" % result.short
    if result.uncompared is not None:
        return "nothing shows the port ran: %s" % result.uncompared
    return verdict(result)


def tensor_rows(result: Comparison, selection: Optional[Selection] = None) -> List[List[str]]:
    """The per-tensor table's rows: kind, name, result, failed steps, first failed step, and
    the worst step's numbers (over the steps the selection shows)."""
    rows = []
    for t in result.tensors:
        steps = list(t.by_step) if selection is None else selection.steps_of(t)
        if not steps:
            continue
        _, w = (t.worst_step, t.worst) if selection is None else selection.worst(t, steps)
        first = "-" if t.first_failed is None else step_label(t.first_failed)
        if t.first_failed is not None and t.by_step[t.first_failed].basis in ("digest", "bits"):
            first += " (digest)"
        if w.discrete:  # compared exactly: relative errors, tolerances and ulps mean nothing there
            numbers = [_whole(w.max_abs) if w.max_abs else "-", "-", "-", "-", "-"]
        else:
            numbers = [num(w.max_abs), num(w.max_rel), num(w.needed_atol), num(w.needed_rtol),
                       num(max(t.by_step[s].ulps for s in steps))]
        rows.append([t.kind, t.name, _status(t), "%d/%d" % (t.failed_steps, t.steps), first,
                     "%.1f%%" % (100 * w.fraction)] + numbers)
    return rows


def render(result: Comparison, selection: Optional[Selection] = None, width: Optional[int] = None) -> str:
    """The text report; `selection` narrows the per-tensor table (not the verdict), `width`
    elides long names so the table fits that many columns."""
    lines = ["%s  %s vs golden %s: %d steps compared, %d tensors" % (
        verdict(result), result.actual, result.golden, result.steps, len(result.tensors))]
    if result.advice is not None:
        lines.append("advice: " + result.advice)
    if result.golden_provenance is not None and result.golden_provenance.derived:
        lines.append("golden is " + origin_line(result.golden_provenance, result.golden))
    lines += diff_lines(result.environment_diff)
    lines.append("tolerance: %s (%s)" % (result.profile.name, result.profile.reason))
    if result.forcing != "none":
        lines.append(forcing_line(result.forcing, result.forced))
    lines += judged_lines(result)
    if result.distribution is not None:
        lines.append(distribution_line(result.distribution))
    lines += ["note: " + note for note in result.notes]
    if result.short is not None:
        lines.append("the replay is short: %s; replay every step (or pass steps=N to replay fewer on purpose)"
                     % result.short)
    if result.uncompared is not None:
        lines.append("NOT A MATCH: %s" % result.uncompared)
    first = result.first_divergence
    if first is not None:
        lines += divergence(first) + divergence_source(result)
    if result.likely_cause is not None:
        lines += cause(result.likely_cause)
    lines += fingerprint_lines(result, fingerprint)
    lines += [convention(hint) for hint in result.conventions]
    lines += [slip(hint) for hint in result.slips]
    lines += [distribution_hint(hint) for hint in result.distribution_hints]
    shown = [n for n in result.noise if (first is None or n.key != first.key) and n.link != UPDATE]
    carried = [n for n in result.noise if n.link == UPDATE]
    if carried:
        lines.append("accepted as round-off an update carried (verified at its step): %d tensor(s):" % len(carried))
        lines += ["  from %s: %s" % (step_label(n.step), noise_line(n)) for n in carried[:8]]
        lines += ["  ... and %d more" % (len(carried) - 8)] if len(carried) > 8 else []
    if shown:
        lines.append("accepted as explained noise (accept_noise): %d tensor(s) fail the tolerance only where "
                     "amplified round-off explains it:" % len(shown) if result.tolerance.accept_noise else
                     "also failing, explained as amplified round-off (accept with accept_noise=True):")
        lines += ["  from %s: %s" % (step_label(n.step), noise_line(n)) for n in shown[:8]]
        if len(shown) > 8:
            lines.append("  ... and %d more" % (len(shown) - 8))
    if result.missing:
        lines.append("missing from the replay (%d): %s" % (len(result.missing), ", ".join(result.missing[:12])
                                                            + (" ..." if len(result.missing) > 12 else "")))
        lines += ["  %s: %s" % (key, result.missing_hints[key]) for key in result.missing[:4]
                  if key in result.missing_hints]
    lines += form_lines(result)
    lines += digest_lines(result)
    selection = selection if selection is not None and not selection.everything else None
    rows = tensor_rows(result, selection)
    failing = [r for r in rows if r[2] != "ok"]  # accepted noise too: shown, not hidden
    shown = failing if failing else rows
    part = "" if selection is None else ", showing %s" % selection.describe()
    if shown:
        lines.append("")
        lines.append("%s (worst step of each%s):" % ("failing tensors" if failing else "tensors", part))
        lines += table(["kind", "name", "result", "failed", "first", "differ", "max abs", "max rel", "need atol",
                        "need rtol", "ulps"], shown[:60], right=(3, 5, 6, 7, 8, 9, 10), width=width)
        if len(shown) > 60:
            lines.append("... and %d more" % (len(shown) - 60))
    elif selection is not None:
        lines += ["", "no tensor compared matches the selection (%s)" % selection.describe()]
    if result.not_compared:
        reasons: dict = {}
        for key, why in result.not_compared.items():
            reasons.setdefault(why, []).append(key)
        lines.append("")
        for why, keys in sorted(reasons.items()):
            lines.append("not compared, %s: %s" % (why, ", ".join(sorted(keys)[:8]) + (" ..." if len(keys) > 8 else "")))
    return "\n".join(lines)


def max_error_rows(result: Comparison) -> List[List[str]]:
    """Comparison.max_errors() as table rows: kind, tensors, max abs, max rel, max ulps."""
    return [[e.kind, str(e.tensors), num(e.max_abs), num(e.max_rel), num(e.max_ulps)]
            for e in result.max_errors()]
