"""One variable's update at one step, recomputed in float64 by its TF1 kernel's rule
(update_rules.py) and held to what the step recorded (audit.py runs it over steps and variables).
Numpy only, Python 3.7 syntax."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..keys import ASSIGNED, make_key, step_label
from .audit_result import AGREES, DISAGREES, NOT_APPLIED, OTHER_RATE, VariableAudit
from .bounded import Bounded
from .update_rules import DECAY, PARALLEL, WHOLE, Rule, recompute, rule_of

FLOATS = ("float16", "float32", "float64")
CHUNK = 1 << 18  # elements recomputed at a time: a few MB of float64 temporaries


class NotAuditable(Exception):
    """Why a variable cannot be audited at a step (its detail)."""


class _Recorded(NamedTuple):
    """A tensor the step recorded after the update: the variable or one of its slots."""

    key: str  # "var/<name>", "slot/<name>"
    label: str  # "var/<name>", "slot m (slot/<name>)"
    short: str  # "var", "slot m"
    value: np.ndarray


@dataclass
class _Check:
    """A recomputed tensor against the recorded one, part after part (add)."""

    key: str
    label: str  # "var/<name>" or "slot m (slot/<name>)"
    short: str  # "var" or "slot m"
    shape: Tuple[int, ...]
    ulps: float = 0.0  # the largest error, in ulps of its element's scale
    max_abs: float = 0.0
    over: int = 0  # elements beyond the limit
    worst: str = ""  # where the largest error is, with both values

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def add(self, recorded: np.ndarray, expected: Bounded, limit: float, info: Any,
            place: Callable[[int], int]) -> None:
        """Compare a part: `place` maps a position in it to one in the whole tensor (C order).
        An error is in ulps of the element's scale, its bound (and the dtype's smallest normal,
        `info.tiny`, for results the kernel flushes to zero); a non-finite value must be recorded
        as the same non-finite value, and one beyond the dtype's range as its infinity."""
        rec = np.asarray(recorded, dtype=np.float64).ravel()
        if not rec.size:
            return
        ref = np.broadcast_to(expected.val, np.shape(recorded)).ravel()
        err = np.broadcast_to(expected.err, np.shape(recorded)).ravel()
        with np.errstate(all="ignore"):
            finite = np.isfinite(ref)
            same = ~finite & ((rec == ref) | (np.isnan(rec) & np.isnan(ref)))
            same |= finite & (np.abs(ref) > float(info.max)) & (rec == np.sign(ref) * np.inf)  # overflowed
            diff = np.where(finite & ~same, np.abs(rec - ref), np.where(same, 0.0, np.inf))
            diff = np.where(np.isnan(diff), np.inf, diff)
            ulps = np.where(diff == 0, 0.0, diff / (err + float(info.tiny)))
        ulps = np.where(np.isnan(ulps), np.inf, ulps)  # an unbounded error: inf / inf
        i = int(np.argmax(ulps))
        self.over += int(np.count_nonzero(ulps > limit))
        self.max_abs = max(self.max_abs, float(np.max(diff)))
        if ulps[i] > self.ulps or not self.worst:
            at = [int(j) for j in np.unravel_index(place(i), self.shape)] if self.shape else None
            self.ulps = float(ulps[i])
            self.worst = "%srecorded %r, recomputed %r" % ("" if at is None else "at %s: " % at, float(rec[i]),
                                                           float(ref[i]))


def array_of(value: Any) -> Optional[np.ndarray]:
    """A value as an array, None if it is not a whole numeric one (a digest, a structure)."""
    if isinstance(value, np.ndarray):
        return value if value.dtype.kind in "fiub" else None
    if isinstance(value, (np.generic, int, float)) and not isinstance(value, (bool, np.bool_)):
        return np.asarray(value)
    return None


@dataclass
class _Setup:
    """One variable's update, ready to recompute."""

    rule: Rule
    before: Dict[str, np.ndarray]  # "var" and the slot arguments
    after: Dict[str, _Recorded]
    grad: np.ndarray
    indices: Optional[np.ndarray]
    attrs: Dict[str, Any]
    scalars: Dict[str, float]
    rate_key: str
    rate: float
    dtype: np.dtype


@dataclass
class StepContext:
    """What the variables of one step share."""

    before: Mapping[str, Any]
    after: Mapping[str, Any]
    values: Mapping[str, Any]
    races: Sequence[Any]
    step: int
    nearby: Mapping[int, Mapping[str, Any]]
    declared: Tuple[str, ...]
    limit: float

    def _setup(self, var: str, update: str, fact: Any, slots: Mapping[str, str]) -> "_Setup":
        """What recomputing the variable's update reads, or NotAuditable: why it cannot be."""
        if not isinstance(fact, Mapping):
            raise NotAuditable("meta \"updates\" holds no facts of its update (its gradient is recorded, its "
                                "update op was not found)")
        if update == ASSIGNED:
            raise NotAuditable("a hand-written update (assign ops, not an optimizer's update op): no kernel "
                                "rule to recompute it by")
        if fact.get("also"):
            raise NotAuditable("the step also changes it by %s (decoupled weight decay, say): its update op "
                                "alone does not make its new value" % ", ".join(str(n) for n in fact["also"]))
        rule, sparse = rule_of(update)
        if rule is None:
            raise NotAuditable("no audit rule for the update op %s" % (update or "(not recorded)"))
        attrs = self._attrs(rule, fact)
        if "decay" in fact:  # decoupled weight decay first (contrib's AdamW, MomentumW)
            if not isinstance(fact["decay"], (int, float)) or isinstance(fact["decay"], bool):
                raise NotAuditable("its decoupled weight decay rate is not a graph constant, and the golden does not "
                                    "record it")
            attrs[DECAY] = float(fact["decay"])
        key = "var/" + var
        before = {"var": self._tensor(key, self.before, "before")}
        after = {"var": _Recorded(key, key, "var", self._tensor(key, self.after, "after"))}
        dtype = before["var"].dtype
        if dtype.name not in FLOATS:
            raise NotAuditable("%s is %s: the audit covers %s variables" % (key, dtype, "/".join(FLOATS)))
        for arg in rule.slots:
            if arg not in slots:
                raise NotAuditable("its slot %s is not in the golden's slots metadata" % arg)
            key = make_key("slot", slots[arg])
            before[arg] = self._tensor(key, self.before, "before")
            if before[arg].shape != before["var"].shape:
                raise NotAuditable("%s has shape %s, the variable %s" % (key, before[arg].shape, before["var"].shape))
            after[arg] = _Recorded(key, "slot %s (%s)" % (arg, key), "slot " + arg,
                                   self._tensor(key, self.after, "after"))
        grad, indices = self._gradient(var, before["var"], rule, sparse)
        if DECAY in attrs and indices is not None and len(np.unique(indices)) < len(indices):
            raise NotAuditable("grad/%s/indices repeats an index: its weight decay is applied once per occurrence"
                                % var)
        rate_key = self._rate_key(str(fact.get("lr") or ""))
        scalars = self._scalars(rule, fact, dtype)
        rate = self._scalar(rate_key, self.values, "at", dtype)
        return _Setup(rule, before, after, grad, indices, attrs, scalars, rate_key, rate, dtype)

    def recomputed(self, var: str, update: str, fact: Any, slots: Mapping[str, str]) -> Dict[str, np.ndarray]:
        """The variable and its slots after the step by its update's rule, from the state before,
        the step's gradient and learning rate (key -> float64 array); NotAuditable where the audit
        could not recompute it, or the gradient is sparse."""
        u = self._setup(var, update, fact, slots)
        if u.indices is not None:
            raise NotAuditable("a sparse gradient's update is recomputed by the audit alone")
        out = recompute(u.rule, u.before, dict(u.scalars, lr=u.rate), u.grad, u.attrs, float(np.finfo(u.dtype).eps))
        return {u.after[arg].key: np.asarray(value.val) for arg, value in out.items() if arg in u.after}

    def audit(self, var: str, update: str, fact: Any, slots: Mapping[str, str]) -> VariableAudit:
        u = self._setup(var, update, fact, slots)
        rule, before, after, grad, indices, attrs = u.rule, u.before, u.after, u.grad, u.indices, u.attrs
        scalars, rate_key, rate, dtype = u.scalars, u.rate_key, u.rate, u.dtype
        if not np.all(np.isfinite(grad)) and all(np.array_equal(before[arg], after[arg].value) for arg in before):
            return VariableAudit(var, update, NOT_APPLIED, "its gradient is not finite, and the variable and its "
                                 "slots are as they were: the step did not apply it (a loss-scale optimizer skips "
                                 "a step whose gradients overflowed)")
        checks = self._checks(rule, before, after, dict(scalars, lr=rate), grad, indices, attrs, dtype)
        if all(c.ulps <= self.limit for c in checks):
            worst = max(checks, key=lambda c: c.ulps)
            repeats = "" if indices is None or len(np.unique(indices)) == len(indices) else \
                "; repeated indices applied in turn, as the kernel does"
            return VariableAudit(var, update, AGREES, "%s ulps of scale (limit %g)%s" % (
                ", ".join("%s %.3g" % (c.short, c.ulps) for c in checks), self.limit, repeats),
                worst.ulps, worst.max_abs, worst.key)
        bad = [c for c in checks if c.ulps > self.limit]
        detail = "; ".join("%s: max abs %.3g = %.3g ulps of scale (limit %g), %d of %d elements over, worst %s"
                           % (c.label, c.max_abs, c.ulps, self.limit, c.over, c.size, c.worst) for c in bad)
        other = self._other_rate(rate_key, rate, rule, before, after, scalars, grad, indices, attrs, dtype)
        if other is not None:
            j, race = other
            if race is not None:
                return VariableAudit(var, update, OTHER_RATE, "agrees with the learning rate of %s (a racy read: %s)"
                                     % (step_label(j), race), bad[0].ulps, bad[0].max_abs, bad[0].key, j)
            detail += "; it would agree with the learning rate %s recorded, but no race is recorded for %s" \
                      % (step_label(j), rate_key)
        return VariableAudit(var, update, DISAGREES, detail, bad[0].ulps, bad[0].max_abs, bad[0].key)

    def _attrs(self, rule: Rule, fact: Mapping[str, Any]) -> Dict[str, Any]:
        recorded = fact.get("attrs")
        if rule.attrs and not isinstance(recorded, Mapping):
            raise NotAuditable("attrs not recorded (%s decides its arithmetic)" % ", ".join(rule.attrs))
        recorded = recorded if isinstance(recorded, Mapping) else {}
        missing = [a for a in rule.attrs if a not in recorded]
        if missing:
            raise NotAuditable("attr %s not recorded" % ", ".join(missing))
        unknown = sorted(a for a, v in recorded.items() if v is True and a not in rule.attrs and a != "use_locking")
        if unknown:
            raise NotAuditable("attr %s=True: no audit rule for it" % ", ".join(unknown))
        return {a: bool(recorded[a]) for a in rule.attrs}

    def _tensor(self, key: str, values: Mapping[str, Any], when: str) -> np.ndarray:
        if key not in values:
            raise NotAuditable("%s is not held %s the step" % (key, when))
        found = array_of(values[key])
        if found is None:
            raise NotAuditable("%s is not kept whole %s the step (a digest)" % (key, when))
        return found

    def _gradient(self, var: str, like: np.ndarray, rule: Rule,
                  sparse: bool) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        if not sparse:
            grad = self._tensor("grad/" + var, self.values, "at")
            if grad.shape != like.shape:
                raise NotAuditable("grad/%s has shape %s, the variable %s" % (var, grad.shape, like.shape))
            return grad, None
        values = self._tensor("grad/%s/values" % var, self.values, "at")
        indices = self._tensor("grad/%s/indices" % var, self.values, "at")
        if indices.ndim != 1 or indices.dtype.kind not in "iu" or values.shape != indices.shape + like.shape[1:]:
            raise NotAuditable("grad/%s/values %s and /indices %s do not fit the variable's shape %s"
                                % (var, values.shape, indices.shape, like.shape))
        if len(indices) and (indices.min() < 0 or indices.max() >= like.shape[0]):
            raise NotAuditable("grad/%s/indices holds an index out of the variable's %d rows" % (var, like.shape[0]))
        if rule.sparse == PARALLEL and len(np.unique(indices)) < len(indices):
            raise NotAuditable("grad/%s/indices repeats an index: its kernel updates rows in parallel shards, so "
                                "repeated rows race" % var)
        if rule.sparse == WHOLE and len(np.unique(indices)) < len(indices):
            raise NotAuditable("grad/%s/indices repeats an index, which an update that sums its rows first never "
                                "leaves" % var)
        return values, indices.astype(np.int64)

    def _rate_key(self, name: str) -> str:
        if not name:
            raise NotAuditable("its update facts name no learning rate")
        if "lr/" + name in self.values:
            return "lr/" + name
        rates = [key for key in self.values if key.startswith("lr/")]
        if rates == ["lr/learning_rate"]:
            if self.declared and name not in self.declared:
                raise NotAuditable("the step's learning rate is the declared %s, not %s, which its update reads"
                                    % (", ".join(self.declared), name))
            return rates[0]
        raise NotAuditable("its learning rate %s is not recorded at this step" % name)

    def _scalar(self, key: str, values: Mapping[str, Any], when: str, dtype: np.dtype) -> float:
        found = self._tensor(key, values, when)
        if found.size != 1:
            raise NotAuditable("%s holds %d values %s the step, not one" % (key, found.size, when))
        return float(found.reshape(()).astype(dtype))  # the kernel reads it in the variable's dtype

    def _scalars(self, rule: Rule, fact: Mapping[str, Any], dtype: np.dtype) -> Dict[str, float]:
        """The op's scalar inputs: hyperparameters the graph fixes, else read from the variable
        the update facts' "state" names (a Keras optimizer's hyperparameter variables), and its
        state (Adam's beta powers), each as it was before the step."""
        hyper = fact.get("hyper") if isinstance(fact.get("hyper"), Mapping) else {}
        state = fact.get("state") if isinstance(fact.get("state"), Mapping) else None
        fixed = {h: hyper[h] for h in rule.hyper if isinstance(hyper.get(h), (int, float))
                 and not isinstance(hyper.get(h), bool)}
        missing = [h for h in rule.hyper if h not in fixed and not (state or {}).get(h)]
        if missing:
            raise NotAuditable("hyperparameter %s not recorded in this golden (not a graph constant)"
                                % ", ".join(missing))
        out = {h: float(np.asarray(v).astype(dtype)) for h, v in fixed.items()}
        for arg in [h for h in rule.hyper if h not in fixed] + list(rule.state):
            name = state.get(arg) if state is not None else _found_state(arg, self.before)
            if not name:
                raise NotAuditable("its %s is not recorded in its update facts%s" % (
                    arg, "" if state is not None else " and the state before holds no single %s* variable" % arg))
            key = next((k for k in ("slot/" + name, "var/" + name) if k in self.before), None)
            if key is None:
                raise NotAuditable("%s, its %s, is not held before the step" % (name, arg))
            offset = hyper.get(arg + "_offset", 0)  # a counter read plus a constant (AdagradDA's global_step + 1)
            out[arg] = self._scalar(key, self.before, "before", dtype) + float(offset)
        return out

    def _checks(self, rule: Rule, before: Mapping[str, np.ndarray], after: Mapping[str, _Recorded],
                scalars: Mapping[str, float], grad: np.ndarray, indices: Optional[np.ndarray],
                attrs: Mapping[str, Any], dtype: np.dtype) -> List[_Check]:
        """Each output of the rule against the recorded one: a dense update part after part (its
        float64 temporaries stay small whatever the variable's size); a sparse one on the rows it
        names, then the other rows, which must be as they were."""
        info = np.finfo(dtype)
        ulp = float(info.eps)
        shape = before["var"].shape
        checks = {arg: _Check(r.key, r.label, r.short, shape) for arg, r in after.items()}
        for arg, r in after.items():
            if r.value.shape != shape:  # not an update op's doing
                checks[arg].ulps, checks[arg].max_abs = float("inf"), float("inf")
                checks[arg].worst = "shape %s, %s before the step" % (r.value.shape, shape)
        ready = [arg for arg in after if not checks[arg].worst]
        rows = None
        if indices is not None and rule.sparse == WHOLE:  # the rows summed into the variable's shape
            inner = int(np.prod(shape[1:]))
            dense = np.zeros(shape, dtype=grad.dtype)
            np.add.at(dense, indices, grad)
            given = np.zeros(shape[0], dtype=bool)
            given[indices] = True
            grad, indices, rows = dense, None, np.repeat(given, inner)
        if indices is None:
            flat = {arg: np.ravel(v) for arg, v in before.items()}
            size = max(int(np.prod(shape)), 1)
            part = size if rule.reduces else CHUNK
            for a in range(0, size, part):
                out = recompute(rule, {arg: v[a:a + part] for arg, v in flat.items()}, scalars,
                                np.ravel(grad)[a:a + part], attrs, ulp, rows=None if rows is None else rows[a:a + part])
                for arg in ready:
                    checks[arg].add(np.ravel(after[arg].value)[a:a + part], out[arg], self.limit, info,
                                    lambda i, a=a: a + i)
            return list(checks.values())
        rows, compact = np.unique(indices, return_inverse=True)
        inner = int(np.prod(shape[1:]))
        out = recompute(rule, {arg: v[rows] for arg, v in before.items()}, scalars, grad, attrs, ulp, compact)
        for arg in ready:
            checks[arg].add(after[arg].value[rows], out[arg], self.limit, info,
                            lambda i: int(rows[i // inner]) * inner + i % inner)
        left = np.ones(shape[0], dtype=bool)
        left[rows] = False
        per = max(CHUNK // max(inner, 1), 1)  # rows compared at a time
        for r in range(0, shape[0], per):
            kept = np.flatnonzero(left[r:r + per]) + r
            for arg in ready:
                was, now = before[arg][kept], after[arg].value[kept]
                if was.tobytes() != now.tobytes():
                    checks[arg].add(now, Bounded(was, 0.0, ulp), self.limit, info,
                                    lambda i, kept=kept: int(kept[i // inner]) * inner + i % inner)
        return list(checks.values())

    def _other_rate(self, rate_key: str, rate: float, rule: Rule, before: Mapping[str, np.ndarray],
                    after: Mapping[str, _Recorded], scalars: Mapping[str, float], grad: np.ndarray,
                    indices: Optional[np.ndarray], attrs: Mapping[str, Any],
                    dtype: np.dtype) -> Optional[Tuple[int, Optional[str]]]:
        """(the step before or after this one whose recorded rate the update agrees with, the
        race that explains it or None), or None."""
        for j in (self.step - 1, self.step + 1):
            other = array_of(self.nearby.get(j, {}).get(rate_key))
            if other is None or other.size != 1 or float(other.reshape(()).astype(dtype)) == rate:
                continue
            checks = self._checks(rule, before, after, dict(scalars, lr=float(other.reshape(()).astype(dtype))),
                                  grad, indices, attrs, dtype)
            if all(c.ulps <= self.limit for c in checks):
                race = next((r for r in self.races if isinstance(r, Mapping) and r.get("lr") == rate_key), None)
                return j, None if race is None else _race_text(race)
        return None


def _found_state(arg: str, before: Mapping[str, Any]) -> Optional[str]:
    """A golden without the update facts' "state": the one variable named like the argument
    (beta1_power:0, model/beta1_power_1:0, ...) before the step, if there is exactly one."""
    pattern = re.compile(r"^%s(_\d+)?:\d+$" % re.escape(arg))
    names = {key.split("/", 1)[1] for key in before if key.startswith(("slot/", "var/"))}
    found = [name for name in names if pattern.match(name.rsplit("/", 1)[-1])]
    return found[0] if len(found) == 1 else None


def _race_text(race: Mapping[str, Any]) -> str:
    return "%s reads %s (op %s) unordered with its increment (op %s)" % (
        race.get("lr"), race.get("counter"), race.get("read"), race.get("increment"))
