"""Text for the store's commands: `show`, `verify`, `recover`."""

from __future__ import annotations

import collections
from typing import Any, List, Mapping

from ..comparison.envdiff import numerics
from ..keys import ASSIGNED, AUDIT, LOSSES, RECORDING, SELF_CHECK, WARNINGS
from ..store import AuditResult, RecoverResult, Trace, VerifyResult, provenance
from ..store.held import held_lines
from ..store.meta import RecordingMeta
from ..store.raced import effect_of, raced
from .audit import audit_lines
from .environment import summary
from .provenance import origin_line
from .text import nested_lines, size, table


def show(trace: Trace) -> str:
    lines = [
        "golden    %s" % trace.path,
        "format    %d, written by %s" % (trace.format_version, trace.producer),
        "created   %s" % trace.created,
        "machine   %s" % summary(numerics(trace.meta)),
        "origin    %s" % origin_line(provenance.read(trace.meta, trace.created), trace.path),
    ]
    if trace.complete:
        state = "complete" + (" (recovered from an unfinished recording)" if trace.recovered else "")
    elif trace.writing:
        state = "UNFINISHED: %s" % trace.problem
    else:
        state = "UNFINISHED: %s; run `tracekit recover %s`" % (trace.problem, trace.path)
    lines.append("state     %s" % state)
    if trace.recording:
        lines.append("note      %s" % trace.recording)
    lines += identified(trace.meta)
    lines.append("steps     %d%s" % (len(trace), " + initial state" if trace.has_initial else ""))
    lines += keyframe_lines(trace) + _draws_kept(trace)
    lines += ["WARNING   " + warning for warning in _warnings(trace.meta)]
    if isinstance(trace.meta.get(AUDIT), dict):  # the audit the recorder kept, as `verify --audit` prints one
        lines += audit_lines(AuditResult.of(trace.meta[AUDIT], trace.path))
    # `tracekit log` shows the provenance; the audit is shown above
    described = {k: v for k, v in trace.meta.items() if k not in (provenance.META_KEY, AUDIT, WARNINGS)}
    if described:
        lines.append("metadata")
        nested_lines("", described, lines)
    rows = []
    raw_total = stored_total = 0
    for t in trace.catalog:
        shape = "varies" if t.shape is None else "(%s)" % ", ".join(str(d) for d in t.shape)
        steps = str(t.steps) + ("+init" if t.initial else "") + ("+%dd" % t.digests if t.digests else "")
        rows.append([t.kind, t.name, shape, t.dtype, steps, size(t.stored_bytes), size(t.raw_bytes),
                     "%.2f" % t.ratio])
        raw_total += t.raw_bytes
        stored_total += t.stored_bytes
    lines.append("")
    lines.append("tensors   %d" % len(trace.catalog))
    lines.extend(table(["kind", "name", "shape", "dtype", "steps", "stored", "raw", "ratio"], rows,
                       right=(4, 5, 6, 7)))
    if raw_total:
        lines.append("total: %s stored, %s raw, ratio %.2f" % (
            size(stored_total), size(raw_total), raw_total / stored_total if stored_total else 1.0))
    return "\n".join(lines)


def _warnings(meta: Mapping[str, Any]) -> List[str]:
    stored = meta.get(WARNINGS)
    return [str(w) for w in stored] if isinstance(stored, list) else []


def warning_lines(path: str, warnings: List[str]) -> List[str]:
    """What a recording ends with: each of the golden's warnings whole, a line each."""
    if not warnings:
        return []
    return ["%s carries %d warning%s (tracekit show prints them again):" % (
        path, len(warnings), "" if len(warnings) == 1 else "s")] + ["  WARNING %s" % w for w in warnings]


def keyframe_lines(trace: Trace) -> List[str]:
    """Where a golden keeps its tensors whole, from its recording's keyframe plan."""
    frames = RecordingMeta.of(trace.meta.get(RECORDING)).keyframes
    if not isinstance(frames, dict) or frames.get("every") == 1 and not frames.get("online"):
        return []
    every = frames.get("every")
    rest = "digests (statistics and a fixed sample) of the rest" if frames.get("digests") else "nothing of the rest"
    if frames.get("online"):  # a budget without a step count: chosen as the run went
        thinned = frames.get("thinned") or []
        lines = ["keyframes chosen as the run went (no step count given) keep %s whole: %s; the steps between keep "
                 "inputs, random draws, losses and learning rates whole, %s"
                 % (", ".join(frames.get("whole") or []),
                    "none after the initial state" if every is None and not thinned else
                    "every step at first, the spacing doubled at steps %s" % ", ".join(map(str, thinned)) if thinned
                    else "every step", rest)]
    elif every:
        lines = ["keyframes every %s steps%s keep %s whole; the steps between keep inputs, random draws, losses "
                 "and learning rates whole, %s" % (every, " and the last" if frames.get("last") else "",
                                                   ", ".join(frames.get("whole") or []), rest)]
    else:
        lines = ["keyframes none: the initial state is whole; every step keeps inputs, random draws, losses and "
                 "learning rates whole, %s" % rest]
    if frames.get("digests"):
        lines.extend(_digests_made(trace))
    budget = frames.get("budget")
    if isinstance(budget, dict) and budget.get("bytes"):
        if frames.get("online"):
            ended = frames.get("ended")
            lines.append("budget    %s%s" % (size(budget["bytes"]), "" if ended is None else
                                             ": full at step %d, where the recording ended" % ended))
        else:
            lines.append("budget    %s: planned %s%s" % (size(budget["bytes"]), size(budget.get("estimate", 0)),
                                                         "; keyframes kept as digests to stay in it: %s"
                                                         % frames["skipped"] if frames.get("skipped") else ""))
    return lines


def _digests_made(trace: Trace) -> List[str]:
    """How the last step kept as digests made them: in the graph (their sums' round-off stated)
    or in numpy (float64 sums)."""
    for index in range(len(trace) - 1, max(len(trace) - 4, -1), -1):
        digests = trace.step(index).digests
        if digests:
            graph = [d.roundoff for d in digests.values() if d.roundoff]
            return ["digests   at step %d: %d made in the graph (sums in the tensor's precision over rows, their "
                    "round-off stated, at most %.2g of their scale), %d in numpy (float64 sums)"
                    % (index, len(graph), max(graph), len(digests) - len(graph)) if graph else
                    "digests   at step %d: %d, made in numpy (float64 sums)" % (index, len(digests))]
    return []


def _draws_kept(trace: Trace) -> List[str]:
    """How many of the recorded draws the golden keeps as their generator (store/drawn.py)."""
    draws = [t for t in trace.catalog if t.kind == "random" and t.steps]
    drawn = sum(t.drawn for t in draws)
    if not drawn:
        return []
    return ["draws     %d of %d kept as their generator (seeds and Philox counter; the values made again bit for "
            "bit when recorded) at %d steps in all: %s of values in %s"
            % (sum(1 for t in draws if t.drawn), len(draws), drawn, size(sum(t.raw_bytes for t in draws if t.drawn)),
               size(sum(t.stored_bytes for t in draws if t.drawn)))]


def _rates_said(updates: Mapping[str, Any], slots: Mapping[str, Any]) -> str:
    """What re-executing the hand-written updates verified of their learning rates and slots."""
    checks = collections.Counter()  # type: collections.Counter
    for fact in updates.values():
        if isinstance(fact, dict) and fact.get("update") == ASSIGNED:
            check = fact.get("lr_check") if isinstance(fact.get("lr_check"), dict) else {}
            found = str(check.get("detail", "")).startswith("found by re-execution")
            checks["rate found by re-execution" if found else "rate verified by re-execution"
                   if check.get("verdict") == "verified" and fact.get("lr") else "no rate (the scalar first taken scales no step, nor does another)"
                   if check.get("verdict") == "refuted" else "rate unverified" if fact.get("lr") else "no rate found"] += 1
    roles = collections.Counter(str(s["role"]) for s in slots.values() if isinstance(s, dict) and s.get("role"))
    said = ["%s: %d" % kv for kv in sorted(checks.items())]
    if roles:
        said.append("slots by what the update does with the gradient: %s" % ", ".join(
            "%d %s" % (n, role) for role, n in sorted(roles.items())))
    return "; " + "; ".join(said) if said else ""


def identified(meta: Mapping[str, Any]) -> List[str]:
    """How the recorder found what a step updates (update ops, hand-written assigns), the
    structures its inputs came in and the races it saw, from the golden's metadata."""
    lines = []
    updates = meta.get("updates") if isinstance(meta.get("updates"), dict) else {}
    slots = meta.get("slots") if isinstance(meta.get("slots"), dict) else {}
    kinds = collections.Counter(str(u.get("update")) for u in updates.values()
                                if isinstance(u, dict) and u.get("update") != ASSIGNED)
    assigned = {str(s.get("var")) for s in slots.values() if isinstance(s, dict) and s.get("update") == ASSIGNED}
    assigned.update(v for v, u in updates.items() if isinstance(u, dict) and u.get("update") == ASSIGNED)
    if kinds:
        rates = {u.get("lr") for u in updates.values() if isinstance(u, dict) and u.get("lr")}
        lines.append("updates   %d variables by their optimizers' updates (%s): their gradients, slots (by the "
                     "updates' arguments) and %d learning rate(s) read from those updates"
                     % (sum(kinds.values()), ", ".join("%s %d" % kv for kv in sorted(kinds.items())), len(rates)))
    if assigned:
        lines.append("updates   %d variables by hand-written assign ops: gradients from tf.gradients/"
                     "compute_gradients, slots paired by dataflow%s" % (len(assigned), _rates_said(updates, slots)))
    structures = meta.get("inputs") if isinstance(meta.get("inputs"), dict) else {}
    if structures:
        lines.append("inputs    %s: a replay's step gets them under these names too (inputs[%r], ...)"
                     % ("; ".join("%s %s" % (name, _outline(stored)) for name, stored in sorted(structures.items())),
                        sorted(structures)[0]))
    declared = meta.get("declared") if isinstance(meta.get("declared"), dict) else {}
    said = ["%s %s" % (what, ", ".join(str(n) for n in declared.get(key) or ()))
            for key, what in (("train_ops", "train ops"), ("losses", "loss"), ("learning_rates", "learning rates"))
            if declared.get(key)]
    said += ["gradients %s" % ", ".join("%s=%s" % kv for kv in sorted((declared.get("gradients") or {}).items()))] \
        if declared.get("gradients") else []
    if said:
        lines.append("declared  %s (told to the recorder, not found by it)" % "; ".join(said))
    kinds = meta.get(LOSSES) if isinstance(meta.get(LOSSES), dict) else {}
    for kind, losses in kinds.items():
        for key, found in sorted(losses.items()) if isinstance(losses, dict) else []:
            if isinstance(found, dict):
                lines.append("loss      %s is graph tensor %s (%s)%s" % (
                    key, found.get("tensor"), found.get("how"), "; in steps of %s" % kind if len(kinds) > 1 else ""))
                terms = found.get("terms") if isinstance(found.get("terms"), dict) else {}
                if terms.get("parts"):
                    lines.append("          the sum of %s, checked at its first step; each step's info holds them" % (
                        " + ".join("%g x %s" % (p.get("coefficient"), p.get("tensor")) for p in terms["parts"])
                        + (" + %g" % terms["offset"] if terms.get("offset") else "")))
    accumulation = meta.get("accumulation") if isinstance(meta.get("accumulation"), dict) else {}
    if accumulation:
        forms = {str(f) for f in (accumulation.get("form") or {}).values()}
        lines.append("steps     each applies the gradients of %s micro-batch runs (%s), accumulated in %d variables; its "
                     "inputs, random draws, taps, losses and each micro-batch's gradients (<var>@micro) hold theirs "
                     "along a first axis" % (accumulation.get("micro_batches"), ", ".join(
                         {"sum": "summed", "mean": "averaged", "None": "otherwise: clipped or scaled"}.get(f, f)
                         for f in sorted(forms)) or "how: not checked", len(accumulation.get("state") or ())))
    for line in held_lines(meta):
        lines.append(("holds     " if not line.startswith(" ") else "          ") + line.strip())
    for check in meta.get(SELF_CHECK) or []:
        if isinstance(check, dict):
            lines.append("checked   %s at step %s: %s, %s" % (check.get("key"), check.get("step"),
                                                             str(check.get("verdict")).upper(), check.get("detail")))
    recomputed = meta.get("recomputed") if isinstance(meta.get("recomputed"), dict) else {}
    for race in meta.get("races") or []:
        if not isinstance(race, dict):
            continue
        if "lr" in race:
            lines.append("race      %s reads %s (op %s) unordered with its increment (op %s): a step may read it "
                         "before or after it moves" % (race.get("lr"), race.get("counter"), race.get("read"),
                                                       race.get("increment")))
        else:
            key = race.get("tensor")
            said = ("recorded as recomputed from the state the step started from at %d steps" % recomputed[key]
                    if key in recomputed else "recorded as fetched")
            moved = effect_of(meta, key)
            if moved is not None:  # a gradient: what the update read, its race measured
                said = "recorded as its update read it, which the race moved by up to %.3g of its size" % moved
            lines.append("race      %s reads %s (op %s) unordered with its update (op %s): %s" % (
                key, race.get("variable"), race.get("read"), race.get("update"), said))
    lines += ["race      " + line for line in raced(meta)]
    fed = meta.get("fed_dtypes") if isinstance(meta.get("fed_dtypes"), dict) else {}
    for name, dtype in sorted(fed.items()):
        lines.append("input     %s was fed as %s and is stored as the graph consumed it" % (name, dtype))
    return lines


def _outline(stored: Any) -> str:
    """A stored input structure in short: {a, b} for a dict, (2) for a tuple, the tensor for a leaf."""
    if isinstance(stored, dict) and isinstance(stored.get("dict"), dict):
        return "{%s}" % ", ".join(sorted(stored["dict"]))
    if isinstance(stored, dict) and isinstance(stored.get("tuple"), list):
        return "(%s)" % ", ".join(_outline(item) for item in stored["tuple"])
    return str(stored)


def verified(result: VerifyResult) -> str:
    notes = ["  note: %s" % note for note in result.notes]
    if result.ok:
        return "\n".join(["ok       %s: %d steps, %d tensors, every checksum matches" % (
            result.path, result.steps, result.values)] + notes)
    head = "DAMAGED  %s: %d problem%s" % (result.path, len(result.problems), "" if len(result.problems) == 1 else "s")
    if not result.complete and len(result.problems) == 1:
        head = "UNFINISHED %s" % result.path
    shown = result.problems[:20]
    more = len(result.problems) - len(shown)
    return "\n".join([head] + ["  " + p for p in shown] + (["  ... and %d more" % more] if more else []) + notes)


def recovered(result: RecoverResult) -> str:
    if result.action == "none":
        return "%s is already a finished golden (%d steps); nothing to do" % (result.path, result.steps)
    if result.action == "stale-journal":
        return "%s is a finished golden (%d steps); %s" % (result.path, result.steps, result.reason)
    dropped = (", left out %d values of the unfinished step" % result.dropped_values) if result.dropped_values else ""
    return "recovered %s: %d steps%s (%s)" % (result.path, result.steps, dropped, result.reason)
