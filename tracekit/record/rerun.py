"""The update audit by re-execution: each update a step ran, run again from what the step recorded.

At the steps the recorder audits, the ops that change the step's variables and slots (an
optimizer's update op, a hand-written optimizer's assign ops, alike) run again in the graph's
copy (selfcheck.GraphCopy), loaded with the state the step started from and fed what the step
was fed and drew, with the gradients and learning rates it recorded; the variables and slots
they leave are held to those the step recorded. No rule table is needed: every update is
auditable, and where a kernel rule exists (store/update_rules.py) the two checks must agree.

Once per variable the same run is made again with what the recorder claims of the update
changed, so each claim is verified by what the update does (`Claims`):
- its gradient: fed as zero, the variable or its slots must come out otherwise;
- its learning rate (a hand-written update's scalar, updates._learning_rate): at 0x, 1x and 2x it
  must move the step by the share it multiplies, exactly (affine), and by more than round-off;
  where the step moves nothing (a warmup's rate of 0) the step counter is moved on until it
  does. An addend's factor inside the arithmetic (`rate + 1e-30 * y`) is no rate and is not
  recorded as one; the update's other scalars (a product's factors next) are judged in turn, but
  one computed from a variable the step updates (the rate times a parameter's scale) is none a
  schedule gives;
- its slots' roles: what the update does with the gradient in them (linear: a first moment;
  quadratic: a second moment; a sum that never decays: an accumulator; one entry per row or
  column of the variable: factored), from the gradient at 0x, 1x, 2x and one row at 2x.
Python 3.7 syntax.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from ..keys import MICRO, UNCLIPPED, split_key
from ..store.audit_result import AGREES, DISAGREES, NOT_AUDITABLE, RERUN, RERUN_ULPS, StepAudit, VariableAudit
from .updates import ASSIGNED, DENSE_CONVERSIONS, VARIABLE_OPS

VERIFIED, REFUTED, UNVERIFIED, UNDECIDED = "verified", "refuted", "unverified", "undecided"
SEARCHED = 6  # a refuted rate's alternatives tried, at most (two runs each, once per recording)
# The step counter moved on by these, in turn, where the step moves nothing (a warmup from a rate of 0)
ADVANCES = (0, 1, 2, 4, 16)
# A rate is told by steps that move a variable beyond round-off of this magnitude at least: a step
# of 1e-34 on a bias at 0 (a tiny addend, the rate itself 0) tells nothing
FLOOR = 1e-6


@dataclass
class Claims:
    """What re-execution found of one variable's update: each claim's verdict and why."""

    gradient: Tuple[str, str] = (UNVERIFIED, "not probed")
    lr: Optional[Tuple[str, str]] = None  # a hand-written update's claimed rate (None: none claimed)
    roles: Dict[str, str] = field(default_factory=dict)  # slot -> its role, found by re-execution
    found: Optional[Tuple[str, Any]] = None  # the claimed rate refuted: (the scalar that is the rate, its value)

    def lr_meta(self, tensor: str) -> Dict[str, str]:
        verdict, detail = self.lr or (UNVERIFIED, "")
        return {"verdict": verdict, "detail": detail, "tensor": tensor}


class Rerun:
    """A step's updates, run again in a copy of its graph (see the module's doc)."""

    def __init__(self, copy: Any, plan: Any, before: Mapping[str, Any], fed: Mapping[str, Any],
                 values: Sequence[Tuple[str, Any]], keys: Mapping[str, str]) -> None:
        self._copy = copy
        counter = getattr(plan.global_step, "name", None)
        self._counter = counter if counter in before else None  # the step counter, where the state holds it
        self._keys = keys  # variable name -> its key ("var/..", "slot/..")
        self._plan = plan
        self._before = before
        self.feeds: Dict[str, Any] = dict(fed)
        self.grads: Dict[str, str] = {}  # variable -> the tensor its recorded gradient is fed at (dense, or rows)
        for key, value in values:
            kind, name = split_key(key)
            tensor = plan.fetch.get(key)
            if kind not in ("grad", "lr") or tensor is None or MICRO in name:
                continue
            self.feeds[tensor.name] = value
            for twin in _twins(copy.graph.get_tensor_by_name(tensor.name)):
                self.feeds.setdefault(twin, value)
            if kind == "grad" and UNCLIPPED not in name and not name.endswith("/indices"):
                self.grads[name[:-len("/values")] if name.endswith("/values") else name] = tensor.name
        self.updates = [u for u in plan.updates if u.var is not None and u.var in before]
        self.reads = list(dict.fromkeys(n for u in self.updates for n in [u.var] + list(u.slots) if n in before))

    def run(self, overrides: Optional[Mapping[str, Any]] = None, advance: int = 0) -> Dict[str, np.ndarray]:
        """The variables and slots after the step's update ops, from the state it started from
        (`advance`: with the step counter moved on by that many steps)."""
        feeds = dict(self.feeds)
        feeds.update(overrides or {})
        self._copy.load(self._state(advance), feeds)
        return self._copy.rerun(self._plan.targets, self.reads)

    def _state(self, advance: int) -> Mapping[str, Any]:
        if not advance:
            return self._before
        state = dict(self._before)
        state[self._counter] = np.asarray(self._before[self._counter] + advance, np.asarray(self._before[
            self._counter]).dtype)
        return state

    def audit(self, step: int, after: Mapping[str, Any]) -> Tuple[StepAudit, Optional[Dict[str, np.ndarray]]]:
        """Each update's variable and slots, re-executed, against `after` (name -> recorded value)."""
        try:
            got = self.run()
        except Exception as exc:  # the copy cannot run them: said, per variable
            why = "its update could not be re-executed (%s: %s)" % (type(exc).__name__, _first_line(exc))
            return StepAudit(step, tuple(VariableAudit(u.var, u.kind, NOT_AUDITABLE, why, by=RERUN)
                                         for u in self.updates)), None
        out = []
        for update in self.updates:
            names = [n for n in [update.var] + list(update.slots) if n in got and n in after]
            out.append(_verdict(update, names, got, after, self._before, self._keys))
        return StepAudit(step, tuple(out)), got

    def claims(self, base: Mapping[str, np.ndarray], wanted: Sequence[str]) -> Dict[str, Claims]:
        """What re-execution verifies of the claims about the updates of `wanted` (variables)."""
        updates = [u for u in self.updates if u.var in wanted]
        out = {u.var: Claims() for u in updates}
        if not updates:
            return out
        scaled = lambda factor, row=False: {name: _scaled(self.feeds[name], factor, row)
                                            for name in self.grads.values()}
        zero = self._probe(scaled(0.0))
        slotted = any(u.kind == ASSIGNED and u.slots for u in updates)  # a kernel's slots are its arguments
        double = self._probe(scaled(2.0)) if slotted else "not run"
        one_row = self._probe(scaled(2.0, row=True)) if slotted else "not run"
        for update in updates:
            claims = out[update.var]
            claims.gradient = _reads_gradient(update, base, zero, self.grads, self.feeds)
            if update.kind == ASSIGNED:
                for slot in update.slots:
                    if slot in base:
                        claims.roles[slot] = _role(self._before.get(slot), base[slot], zero, double, one_row, slot,
                                                   np.shape(base[update.var]))
        rated = [u for u in updates if u.kind == ASSIGNED and u.lr is not None]
        for var, (verdict, detail) in self.judge_rates({u.var: u.lr.name for u in rated}, together=True).items():
            out[var].lr = (verdict, detail)
        self._search([u for u in rated if out[u.var].lr[0] == REFUTED], out)
        return out

    def judge_rates(self, claimed: Mapping[str, str], together: bool = False) -> Dict[str, Tuple[str, str]]:
        """Each variable's claimed rate (variable -> the scalar's tensor name), judged by scaling it
        (_is_rate): at the step's state, else, where its update moves nothing beyond round-off (a
        warmup from a rate of 0), with the step counter moved on. `together`: the scalars scaled in
        one run (each update reads its own), else one run each."""
        out: Dict[str, Tuple[str, str]] = {}
        pending = {}
        for var, name in claimed.items():
            state = _reads_updated(self._copy.graph.get_tensor_by_name(name), set(self.reads))
            if state is not None:
                out[var] = (REFUTED, "it reads %s, which the step updates: not a rate a schedule gives" % state)
            else:
                pending[var] = name
        for advance in ADVANCES:
            if not pending or (advance and self._counter is None):
                break
            base = self._probe({}, advance)
            names = sorted(set(pending.values()))
            values = self._rates(names, advance)
            for group in [names] if together else [[name] for name in names]:
                lr0 = self._probe({n: _scaled(values.get(n), 0.0) for n in group}, advance)
                lr2 = self._probe({n: _scaled(values.get(n), 2.0) for n in group}, advance)
                for var in [v for v, n in pending.items() if n in group]:
                    verdict, detail = _is_rate(var, self._state(advance).get(var), base, lr0, lr2)
                    if verdict != UNDECIDED:
                        out[var] = (verdict, detail + (" (the step counter moved on by %d, where the step moves)"
                                                       % advance if advance else ""))
                        del pending[var]
        out.update((var, (UNVERIFIED, "its update moves the variable by round-off only at this step%s: the rate "
                          "cannot be told" % (" and %d steps on" % ADVANCES[-1] if self._counter else "")))
                   for var in pending)
        return out

    def _search(self, refuted: Sequence[Any], out: Dict[str, Claims]) -> None:
        """For updates whose claimed rate is refuted: their other scalars (updates._scalars),
        nearest first, each judged in turn; the first verified is its rate."""
        names: List[str] = []
        for update in refuted:
            names += [t.name for t in update.rates if t.name not in names]
        # a scalar computed from what the step updates is no rate, and costs no run to say so
        updated = set(self.reads)
        names = [n for n in names if _reads_updated(self._copy.graph.get_tensor_by_name(n), updated) is None]
        for name in names[:SEARCHED]:
            waiting = [u.var for u in refuted if out[u.var].found is None and any(t.name == name for t in u.rates)]
            judged = self.judge_rates({var: name for var in waiting}) if waiting else {}
            values = self._rates([name]) if any(v == VERIFIED for v, _ in judged.values()) else {}
            for var, (verdict, detail) in judged.items():
                if verdict == VERIFIED and name in values:
                    out[var].found = (name, values[name])

    def _rates(self, names: Sequence[str], advance: int = 0) -> Dict[str, Any]:
        """Scalars' values at the step (`advance`: the counter moved on): as recorded, else
        computed in the copy."""
        out = {name: self.feeds[name] for name in names if name in self.feeds and not advance}
        missing = [name for name in names if name not in out]
        if missing:
            try:
                self._copy.load(self._state(advance), self.feeds)
                out.update(zip(missing, self._copy.evaluate(missing)))
            except Exception:  # its probes then fail, and say why
                pass
        return out

    def _probe(self, overrides: Mapping[str, Any], advance: int = 0) -> "Dict[str, np.ndarray] | str":
        try:
            return self.run(overrides, advance)
        except Exception as exc:
            return "%s: %s" % (type(exc).__name__, _first_line(exc))


def _verdict(update: Any, names: Sequence[str], got: Mapping[str, Any], after: Mapping[str, Any],
             before: Mapping[str, Any], keys: Mapping[str, str]) -> VariableAudit:
    if not names:
        return VariableAudit(update.var, update.kind, NOT_AUDITABLE, "re-executed, but its variable after the step "
                             "was not recorded whole", by=RERUN)
    worst: Tuple[float, float, str, str] = (0.0, 0.0, "", "")  # ulps, abs, name, where
    shown = []
    for name in names:
        ulps, diff, where = compare(after[name], got[name], before.get(name))
        shown.append("%s %.3g" % ("var" if name == update.var else "slot " + _short(name, update.var), ulps))
        if ulps > worst[0] or not worst[2]:
            worst = (ulps, diff, name, where)
    ulps, diff, name, where = worst
    if ulps <= RERUN_ULPS:
        return VariableAudit(update.var, update.kind, AGREES, "re-executed: %s ulps of scale (limit %g)" % (
            ", ".join(shown), RERUN_ULPS), ulps, diff, keys.get(name, name), by=RERUN)
    return VariableAudit(update.var, update.kind, DISAGREES,
                         "re-executing its update from the recorded state, gradient and learning rate gives %s %s "
                         "(%.3g ulps of scale; limit %g): the golden's step is not what its update computes" % (
                             keys.get(name, name), where, ulps, RERUN_ULPS), ulps, diff, keys.get(name, name),
                         by=RERUN)


def compare(recorded: Any, got: Any, before: Any = None) -> Tuple[float, float, str]:
    """(the largest error in ulps of its element's scale, the largest absolute error, where it is
    with both values) of a re-executed tensor against the recorded one."""
    rec, new = np.asarray(recorded), np.asarray(got)
    if rec.shape != new.shape:
        return float("inf"), float("inf"), "of shape %s where the step recorded %s" % (new.shape, rec.shape)
    if not rec.size:
        return 0.0, 0.0, ""
    allow = _ulps(rec, new, before)
    a, b = rec.astype(np.float64), new.astype(np.float64)
    with np.errstate(all="ignore"):
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        diff = np.where(same, 0.0, np.abs(a - b))
        diff = np.where(np.isnan(diff), np.inf, diff)
        ulps = np.where(diff == 0, 0.0, diff / allow)
    i = int(np.argmax(ulps))
    at = [int(j) for j in np.unravel_index(i, rec.shape)] if rec.ndim else None
    where = "%s%r where the step recorded %r" % ("" if at is None else "at %s: " % at, float(b.ravel()[i]),
                                                 float(a.ravel()[i]))
    return float(ulps.ravel()[i]), float(np.max(diff)), where


def _ulps(*arrays: Any, floor: float = 0.0) -> np.ndarray:
    """One ulp of each element's scale: its largest magnitude among `arrays` (None skipped; at
    least `floor`), in the first one's float type (float32 for integers)."""
    first = np.asarray(arrays[0])
    dtype = first.dtype if first.dtype.kind == "f" else np.dtype(np.float32)
    scale = np.full(first.shape, floor, np.float64)
    with np.errstate(all="ignore"):
        for array in arrays:
            if array is not None and np.shape(array) == first.shape:
                value = np.abs(np.asarray(array, np.float64))
                scale = np.fmax(scale, np.where(np.isfinite(value), value, 0.0))
    return np.spacing(scale.astype(dtype)).astype(np.float64) + float(np.finfo(dtype).tiny)


def _scaled(value: Any, factor: float, row: bool = False) -> Any:
    """A fed value scaled (`row`: only its first row, along its second-to-last axis)."""
    if value is None:
        return None
    array = np.array(value)
    if array.dtype.kind != "f":
        return array
    if not row:
        return (array * factor).astype(array.dtype)
    if array.ndim >= 2:
        array[..., 0, :] *= factor
    return array


def _moved(a: Any, b: Any, allow: np.ndarray, times: float = 4.0) -> bool:
    """Whether `b` differs from `a` beyond `times` round-off anywhere."""
    with np.errstate(all="ignore"):
        return bool(np.any(~(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)) <= times * allow)))


def _reads_gradient(update: Any, base: Mapping[str, Any], zero: Any, grads: Mapping[str, str],
                    feeds: Mapping[str, Any]) -> Tuple[str, str]:
    fed = grads.get(update.var)
    if fed is None:
        return UNVERIFIED, "no gradient of it is recorded to feed"
    if isinstance(zero, str):
        return UNVERIFIED, "the update could not be re-executed with its gradient zeroed (%s)" % zero
    if not np.any(np.asarray(feeds[fed], np.float64)):
        return UNVERIFIED, "its recorded gradient is zero"
    names = [n for n in [update.var] + list(update.slots) if n in base and n in zero]
    for name in names:
        if _moved(zero[name], base[name], _ulps(base[name], zero[name]), times=0.0):
            return VERIFIED, "fed as zero at %s, the update gives another %s" % (fed, name)
    return REFUTED, ("fed as zero at %s, the update gives the same variable and slots: it does not read the "
                     "gradient recorded as its own" % fed)


def _is_rate(var: str, before: Any, base: Any, lr0: Any, lr2: Any) -> Tuple[str, str]:
    """Does scaling the claimed rate scale the share of the step it multiplies, exactly? UNDECIDED
    where the step itself moves the variable by round-off only (nothing to tell a rate by)."""
    for probe in (base, lr0, lr2):
        if isinstance(probe, str):
            return UNVERIFIED, "the update could not be re-executed with the rate scaled (%s)" % probe
    v0, v1, v2 = (np.asarray(p[var], np.float64) for p in (lr0, base, lr2))
    allow = _ulps(base[var], lr0[var], lr2[var], floor=FLOOR) * RERUN_ULPS
    with np.errstate(all="ignore"):
        if before is None or not np.any(np.abs(v1 - np.asarray(before, np.float64)) > 4.0 * allow):
            return UNDECIDED, ""
        share = v1 - v0  # what the rate's 1x moves the variable by
        moved = np.max(np.abs(share) / allow) if share.size else 0.0
        off = np.max(np.abs((v2 - v1) - share) / allow) if share.size else 0.0
    if not np.isfinite(moved) or moved <= 4.0:
        return REFUTED, ("at 0x and 1x the update gives the same %s (within round-off): the scalar does not scale the "
                         "step, so it is not the learning rate" % var)
    if not np.isfinite(off) or off > 2.0:
        return REFUTED, ("at 2x the step moves by %.3g times its 1x share, not by 2x: the scalar is not a factor of "
                         "the step" % (1.0 + _ratio(v2 - v1, share)))
    return VERIFIED, "the step's share it multiplies moves with it: 0x, 1x, 2x re-executed"


def _twins(tensor: Any) -> List[str]:
    """The tensors computing what `tensor` does, by the same op on the same inputs: each use of a
    sparse gradient in dense arithmetic converts its rows anew (`tf.square(grad)` too), and each
    conversion is fed the value recorded, else the copy would compute it again, from a backward
    pass whose reads the re-executed updates may overtake."""
    op = tensor.op
    if op.type not in DENSE_CONVERSIONS:
        return []
    rows = [t.name for t in op.inputs[:2]]  # the rows and their ids (each conversion slices the shape anew)
    return [c.outputs[tensor.value_index].name for c in op.inputs[0].consumers()
            if c.name != op.name and c.type == op.type and [t.name for t in c.inputs[:2]] == rows]


def _reads_updated(tensor: Any, updated: Set[str], limit: int = 512) -> Optional[str]:
    """The first variable of `updated` a scalar is computed from (a parameter's scale), else None."""
    seen: Set[str] = set()
    stack = [tensor.op]
    while stack and len(seen) < limit:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if op.type in VARIABLE_OPS and op.name + ":0" in updated:
            return op.name + ":0"
        stack.extend(t.op for t in op.inputs)
    return None


def _ratio(a: np.ndarray, b: np.ndarray) -> float:
    scale = float(np.max(np.abs(b)))
    return float(np.sum(a * b) / np.sum(b * b)) if scale > 0 else float("nan")


def _role(before: Any, base: Any, zero: Any, double: Any, one_row: Any, slot: str,
          var_shape: Tuple[int, ...]) -> str:
    """What the update does with the gradient in a slot, as re-executing it with the gradient
    scaled shows (the probes are name -> value, or why they could not run)."""
    if any(isinstance(p, str) for p in (zero, double)):
        return "unknown: the update could not be re-executed with its gradient scaled"
    s0, s1, s2 = (np.asarray(p, np.float64) for p in (zero[slot], base, double[slot]))
    allow = _ulps(base, zero[slot], double[slot])
    d1, d2 = s1 - s0, s2 - s0
    if not _moved(s1, s0, allow):
        return "state the gradient does not move"
    if not _moved(d2, 2.0 * d1, allow, times=8.0):
        degree = "first moment"
    elif not _moved(d2, 4.0 * d1, allow, times=16.0):
        degree = "second moment"
    elif not _moved(d2, d1, allow, times=8.0):
        degree = "moment of the normalized update"
    else:
        return "moved by the gradient nonlinearly"
    if before is not None and np.any(np.asarray(before, np.float64)) and not _moved(s0, before, allow):
        degree = {"first moment": "accumulated gradient", "second moment": "accumulated squared gradient"}.get(
            degree, degree)
    return degree + _factored(np.shape(base), var_shape, slot, one_row, base, allow)


def _factored(shape: Tuple[int, ...], var_shape: Tuple[int, ...], slot: str, one_row: Any, base: Any,
              allow: np.ndarray) -> str:
    """", factored: rows" where the slot holds one entry per row of its variable (its gradient's
    first row moved, only its first entry moves), ", factored: columns" per column."""
    if tuple(shape) == tuple(var_shape) or len(var_shape) < 2 or len(shape) != len(var_shape) - 1:
        return "" if tuple(shape) == tuple(var_shape) else ", reduced to shape %s" % (tuple(shape),)
    rows = tuple(var_shape[:-1]) == tuple(shape)
    columns = tuple(var_shape[:-2]) + tuple(var_shape[-1:]) == tuple(shape)
    if rows and columns and not isinstance(one_row, str):
        moved = ~(np.abs(np.asarray(one_row[slot], np.float64) - np.asarray(base, np.float64)) <= 4.0 * allow)
        rows = bool(np.any(moved)) and not bool(np.any(moved[..., 1:]))
        columns = not rows
    if rows != columns:
        return ", factored: rows" if rows else ", factored: columns"
    return ", factored (rows or columns: not told apart)"


def _short(slot: str, var: str) -> str:
    name, owner = slot.rsplit(":", 1)[0], var.rsplit(":", 1)[0]
    return name[len(owner) + 1:] if name.startswith(owner + "/") else name.rsplit("/", 1)[-1]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""

