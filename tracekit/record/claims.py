"""What is said of an update, verified by re-executing it (rerun.py), once per variable:

- its gradient: fed as zero, the variable or its slots must come out otherwise;
- a hand-written update's learning rate (the scalar updates._learning_rate takes): at 0x, 1x and
  2x it must move the step by the share it multiplies, exactly (affine), and by more than
  round-off; where the step moves nothing (a warmup's rate of 0) the step counter is moved on
  until it does. An addend's factor inside the arithmetic (`rate + 1e-30 * y`) is no rate and is
  not recorded as one; the update's other scalars (a product's factors next) are judged in turn,
  but one computed from a variable the step updates (the rate times a parameter's scale) is none
  a schedule gives;
- a hand-written update's slots: what the update does with the gradient in them (linear: a first
  moment; quadratic: a second moment; a sum that never decays: accumulated; one entry per row or
  column of the variable: factored), from the gradient at 0x, 1x, 2x and one row at 2x.

`Ledger` keeps what was verified and writes it into the golden's update facts and slots; the
recorder leaves out the rates refuted and fetches those found. Python 3.7 syntax.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from ..keys import make_key, split_key
from ..store.audit_result import RERUN_ULPS
from .rerun import Rerun
from .roundoff import blocks, float_type, moved, ulps_of
from .updates import ASSIGNED, VARIABLE_OPS

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


def verify(rerun: Rerun, base: Mapping[str, np.ndarray], wanted: Sequence[str]) -> Dict[str, Claims]:
    """What re-execution verifies of the claims about the updates of `wanted` (variables)."""
    updates = [u for u in rerun.updates if u.var in wanted]
    out = {u.var: Claims() for u in updates}
    if not updates:
        return out
    _gradients_and_roles(rerun, base, updates, out)
    rated = [u for u in updates if u.kind == ASSIGNED and u.lr is not None]
    judged = judge_rates(rerun, {u.var: u.lr.name for u in rated}, together=True, base=base)
    for var, (verdict, detail) in judged.items():
        out[var].lr = (verdict, detail)
    _search(rerun, [u for u in rated if out[u.var].lr[0] == REFUTED], out)
    return out


def _gradients_and_roles(rerun: Rerun, base: Mapping[str, np.ndarray], updates: Sequence[Any],
                         out: Dict[str, Claims]) -> None:
    """Each update's gradient claim and its slots' roles, from the gradients scaled; the probes'
    states (up to a model's variables and slots each) are dropped on return. A probe reads back
    only what is judged of it: the slots at 2x, those that could be factored either way with
    the first row at 2x."""
    scaled = lambda factor, row=False: {name: _scaled(rerun.feeds[name], factor, row)
                                        for name in rerun.grads.values()}
    zero = rerun.probe(scaled(0.0))
    # a kernel's slots are its arguments: only a hand-written update's have a role to find
    slots = [(s, u.var) for u in updates if u.kind == ASSIGNED for s in u.slots if s in base]
    double = rerun.probe(scaled(2.0), reads=[s for s, _ in slots]) if slots else "not run"
    either = [s for s, var in slots if _rows_or_columns(np.shape(base[s]), np.shape(base[var])) == (True, True)]
    one_row = rerun.probe(scaled(2.0, row=True), reads=either) if either else "not run"
    for update in updates:
        claims = out[update.var]
        claims.gradient = _reads_gradient(update, base, zero, rerun.grads, rerun.feeds)
        if update.kind == ASSIGNED:
            for slot in update.slots:
                if slot in base:
                    claims.roles[slot] = _role(rerun.before.get(slot), base[slot], zero, double, one_row, slot,
                                               np.shape(base[update.var]))


def judge_rates(rerun: Rerun, claimed: Mapping[str, str], together: bool = False,
                base: Optional[Mapping[str, np.ndarray]] = None) -> Dict[str, Tuple[str, str]]:
    """Each variable's claimed rate (variable -> the scalar's tensor name), judged by scaling it
    (_is_rate): at the step's state, else, where its update moves nothing beyond round-off (a
    warmup from a rate of 0), with the step counter moved on. `together`: the scalars scaled in
    one run (each update reads its own), else one run each. `base`: the step's update already
    re-executed as it ran (not run again)."""
    out: Dict[str, Tuple[str, str]] = {}
    pending = {}
    for var, name in claimed.items():
        state = _reads_updated(rerun.copy.graph.get_tensor_by_name(name), set(rerun.reads))
        if state is not None:
            out[var] = (REFUTED, "it reads %s, which the step updates: not a rate a schedule gives" % state)
        else:
            pending[var] = name
    for advance in ADVANCES:
        if not pending or (advance and rerun.counter is None):
            break
        at = base if base is not None and not advance else rerun.probe({}, advance, reads=list(pending))
        names = sorted(set(pending.values()))
        values = rerun.rates(names, advance)
        for group in [names] if together else [[name] for name in names]:
            judged = [v for v, n in pending.items() if n in group]  # only their variables read back
            lr0 = rerun.probe({n: _scaled(values.get(n), 0.0) for n in group}, advance, reads=judged)
            lr2 = rerun.probe({n: _scaled(values.get(n), 2.0) for n in group}, advance, reads=judged)
            for var in [v for v, n in pending.items() if n in group]:
                verdict, detail = _is_rate(var, rerun.state(advance).get(var), at, lr0, lr2)
                if verdict != UNDECIDED:
                    out[var] = (verdict, detail + (" (the step counter moved on by %d, where the step moves)"
                                                   % advance if advance else ""))
                    del pending[var]
    out.update((var, (UNVERIFIED, "its update moves the variable by round-off only at this step%s: the rate "
                      "cannot be told" % (" and %d steps on" % ADVANCES[-1] if rerun.counter else "")))
               for var in pending)
    return out


def _search(rerun: Rerun, refuted: Sequence[Any], out: Dict[str, Claims]) -> None:
    """For updates whose claimed rate is refuted: their other scalars (updates._scalars),
    nearest first, each judged in turn; the first verified is its rate."""
    names: List[str] = []
    for update in refuted:
        names += [t.name for t in update.rates if t.name not in names]
    # a scalar computed from what the step updates is no rate, and costs no run to say so
    updated = set(rerun.reads)
    names = [n for n in names if _reads_updated(rerun.copy.graph.get_tensor_by_name(n), updated) is None]
    for name in names[:SEARCHED]:
        waiting = [u.var for u in refuted if out[u.var].found is None and any(t.name == name for t in u.rates)]
        judged = judge_rates(rerun, {var: name for var in waiting}) if waiting else {}
        values = rerun.rates([name]) if any(v == VERIFIED for v, _ in judged.values()) else {}
        for var, (verdict, detail) in judged.items():
            if verdict == VERIFIED and name in values:
                out[var].found = (name, values[name])


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


def _reads_gradient(update: Any, base: Mapping[str, Any], zero: Any, grads: Mapping[str, str],
                    feeds: Mapping[str, Any]) -> Tuple[str, str]:
    fed = grads.get(update.var)
    if fed is None:
        return UNVERIFIED, "no gradient of it is recorded to feed"
    if isinstance(zero, str):
        return UNVERIFIED, "the update could not be re-executed with its gradient zeroed (%s)" % zero
    if not np.any(feeds[fed]):
        return UNVERIFIED, "its recorded gradient is zero"
    names = [n for n in [update.var] + list(update.slots) if n in base and n in zero]
    for name in names:
        if moved(zero[name], base[name], (base[name], zero[name]), times=0.0):
            return VERIFIED, "fed as zero at %s, the update gives another %s" % (fed, name)
    return REFUTED, ("fed as zero at %s, the update gives the same variable and slots: it does not read the "
                     "gradient recorded as its own" % fed)


def _is_rate(var: str, before: Any, base: Any, lr0: Any, lr2: Any) -> Tuple[str, str]:
    """Does scaling the claimed rate scale the share of the step it multiplies, exactly? UNDECIDED
    where the step itself moves the variable by round-off only (nothing to tell a rate by)."""
    for probe in (base, lr0, lr2):
        if isinstance(probe, str):
            return UNVERIFIED, "the update could not be re-executed with the rate scaled (%s)" % probe
    v1 = base[var]
    if before is None or np.shape(before) != np.shape(v1):
        return UNDECIDED, ""
    dtype = float_type(v1)
    stirred, most, off, dot, norm = False, 0.0, 0.0, 0.0, 0.0
    for _, (b0, b1, b2, was) in blocks(lr0[var], v1, lr2[var], before):
        allow = ulps_of(b1, b0, b2, floor=FLOOR, dtype=dtype) * RERUN_ULPS
        w0, w1, w2 = (x.astype(np.float64) for x in (b0, b1, b2))
        with np.errstate(all="ignore"):
            stirred = stirred or bool(np.any(np.abs(w1 - was.astype(np.float64)) > 4.0 * allow))
            share = w1 - w0  # what the rate's 1x moves the variable by
            if share.size:  # np.maximum: a NaN anywhere stays NaN, as over the whole tensor
                most = float(np.maximum(most, np.max(np.abs(share) / allow)))
                off = float(np.maximum(off, np.max(np.abs((w2 - w1) - share) / allow)))
            dot += float(np.sum((w2 - w1) * share))
            norm += float(np.sum(share * share))
    if not stirred:
        return UNDECIDED, ""
    if not np.isfinite(most) or most <= 4.0:
        return REFUTED, ("at 0x and 1x the update gives the same %s (within round-off): the scalar does not scale the "
                         "step, so it is not the learning rate" % var)
    if not np.isfinite(off) or off > 2.0:
        ratio = dot / norm if norm > 0 else float("nan")
        return REFUTED, ("at 2x the step moves by %.3g times its 1x share, not by 2x: the scalar is not a factor of "
                         "the step" % (1.0 + ratio))
    return VERIFIED, "the step's share it multiplies moves with it: 0x, 1x, 2x re-executed"


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


def _role(before: Any, base: Any, zero: Any, double: Any, one_row: Any, slot: str,
          var_shape: Tuple[int, ...]) -> str:
    """What the update does with the gradient in a slot, as re-executing it with the gradient
    scaled shows (the probes are name -> value, or why they could not run)."""
    if any(isinstance(p, str) for p in (zero, double)):
        return "unknown: the update could not be re-executed with its gradient scaled"
    # whether, anywhere: the gradient moves the slot; 2x moves it by other than 2x, 4x, 1x its 1x
    # move; the slot held anything before; and it moved from there with the gradient at 0
    flags = np.zeros(6, bool)
    dtype = float_type(base)
    for _, (s1, z, d, b) in blocks(base, zero[slot], double[slot], before):
        allow = ulps_of(s1, z, d, dtype=dtype)
        s0, s2 = z.astype(np.float64), d.astype(np.float64)
        d1, d2 = s1.astype(np.float64) - s0, s2 - s0
        with np.errstate(all="ignore"):
            off = lambda x, y, times: bool(np.any(~(np.abs(x - y) <= times * allow)))
            flags |= [off(d1, 0.0, 4.0), off(d2, 2.0 * d1, 8.0), off(d2, 4.0 * d1, 16.0), off(d2, d1, 8.0),
                      b is not None and bool(np.any(b)), b is not None and off(s0, b.astype(np.float64), 4.0)]
    stirs, not_first, not_second, not_normalized, held, drifts = flags
    if not stirs:
        return "state the gradient does not move"
    if not not_first:
        degree = "first moment"
    elif not not_second:
        degree = "second moment"
    elif not not_normalized:
        degree = "moment of the normalized update"
    else:
        return "moved by the gradient nonlinearly"
    if held and not drifts:
        degree = {"first moment": "accumulated gradient", "second moment": "accumulated squared gradient"}.get(
            degree, degree)
    return degree + _factored(np.shape(base), var_shape, slot, one_row, base, zero, double)


def _rows_or_columns(shape: Tuple[int, ...], var_shape: Tuple[int, ...]) -> Tuple[bool, bool]:
    """Whether a slot of `shape` could hold one entry per row, per column, of its variable."""
    if len(var_shape) < 2 or len(shape) != len(var_shape) - 1:
        return False, False
    return tuple(var_shape[:-1]) == tuple(shape), tuple(var_shape[:-2]) + tuple(var_shape[-1:]) == tuple(shape)


def _factored(shape: Tuple[int, ...], var_shape: Tuple[int, ...], slot: str, one_row: Any, base: Any, zero: Any,
              double: Any) -> str:
    """", factored: rows" where the slot holds one entry per row of its variable (its gradient's
    first row moved, only its first entry moves), ", factored: columns" per column."""
    if tuple(shape) == tuple(var_shape) or len(var_shape) < 2 or len(shape) != len(var_shape) - 1:
        return "" if tuple(shape) == tuple(var_shape) else ", reduced to shape %s" % (tuple(shape),)
    rows, columns = _rows_or_columns(shape, var_shape)
    if rows and columns and not isinstance(one_row, str):  # a factored slot is a row's or column's size: whole
        allow = ulps_of(base, zero[slot], double[slot])
        with np.errstate(all="ignore"):
            moves = ~(np.abs(np.asarray(one_row[slot], np.float64) - np.asarray(base, np.float64)) <= 4.0 * allow)
        rows = bool(np.any(moves)) and not bool(np.any(moves[..., 1:]))
        columns = not rows
    if rows != columns:
        return ", factored: rows" if rows else ", factored: columns"
    return ", factored (rows or columns: not told apart)"


class Ledger:
    """What re-execution verified of each update, as the golden's facts say it: `facts` is the
    golden's {"updates", "slots"} metadata, changed in place; `refuted` the learning-rate keys not
    recorded; `found` the rates found instead (key -> (tensor, the variables whose updates read it))."""

    def __init__(self, facts: Dict[str, Any]) -> None:
        self.facts = facts
        self.claims: Dict[str, Claims] = {}
        self.refuted: Set[str] = set()
        self.found: Dict[str, Tuple[Any, Set[str]]] = {}

    def note(self, claims: Mapping[str, Claims], plan: Any, graph: Any) -> List[Tuple[str, Any]]:
        """The claims verified at a step of `plan` (in the program's `graph`), written into the
        facts; the values of the rates found, recorded from this step on."""
        found: Dict[str, Any] = {}
        for var, claim in claims.items():
            self._note(var, claim, plan)
            if claim.found is not None:
                found.setdefault(*claim.found)
        left = [key for key in plan.fetch if split_key(key)[0] == "lr" and key not in self.refuted]
        added = []
        for name, value in found.items():  # under the key a rate has
            key = make_key("lr", "learning_rate" if not left and len(found) == 1 else name)
            readers = {var for var, c in self.claims.items() if c.found and c.found[0] == name}
            self.found[key] = (graph.get_tensor_by_name(name), readers)
            self.refuted.discard(key)
            added.append((key, np.asarray(value)))
        return added

    def rates(self, plan: Any) -> Dict[str, Any]:
        """The rates found that a step of `plan` reads (key -> tensor): fetched with it."""
        updated = {u.var for u in plan.updates}
        return {key: tensor for key, (tensor, readers) in self.found.items() if readers & updated}

    def _note(self, var: str, claims: Claims, plan: Any) -> None:
        self.claims[var] = claims
        updates, slots = self.facts["updates"], self.facts["slots"]
        fact = updates.get(var)
        if isinstance(fact, dict):
            fact["gradient_check"] = {"verdict": claims.gradient[0], "detail": claims.gradient[1]}
            if claims.lr is not None and fact.get("lr"):
                fact["lr_check"] = claims.lr_meta(fact["lr"])
                if claims.lr[0] == REFUTED:
                    # not recorded where no other update reads it as its rate (verified, or not judged yet)
                    if not any(isinstance(other, dict) and other.get("lr") == fact["lr"]
                               for name, other in updates.items() if name != var):
                        self.refuted.update(key for key, tensor in plan.fetch.items()
                                            if split_key(key)[0] == "lr" and tensor.name == fact["lr"])
                    fact["lr"] = None
                if claims.found is not None:
                    name = claims.found[0]
                    fact["lr"] = name
                    fact["lr_check"] = {"verdict": VERIFIED, "tensor": name, "detail": (
                        "found by re-execution: the scalar first taken, %s, is no rate (%s); %s scales the step"
                        % (fact["lr_check"]["tensor"], claims.lr[1], name))}
        for slot, role in claims.roles.items():
            if isinstance(slots.get(slot), dict):
                slots[slot]["role"] = role
