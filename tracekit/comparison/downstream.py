"""What an update makes of a gradient's round-off: a variable and its slots that disagree with
the golden only because the optimizer's update amplified a gradient difference that is itself
round-off.

Adam and RMSProp divide by a running root mean square: an element whose gradient was zero
until now and is a few ulps of the tensor's scale at this step moves by the learning rate,
whatever its size, in the direction of its sign. When a discontinuity flips one sample's path
(comparison/arbiter.py), that element's gradient can change sign in the last bits, and the
variable moves a learning rate the other way: far outside any round-off bound of variables,
in float64 as in float32, from a gradient that agrees. Momentum carries such a move on.

So a variable the arbiter's float64 port disagrees on is judged by the golden's own update
rule (store/update_rules.py, the update audit's): from the golden's state before the step, the
golden's learning rate and the float64 port's gradient, the rule must give the float64 port's
variable and slots within the arbiter's round-off bound for them (in eps x the tensor's scale:
the float64 port's hyperparameters are decimals where the golden's are float32, which moves
Adam's second moment by some ulps of its elements). Then the port's update is the golden's
update, and the difference is what that update makes of the gradient's round-off. The gradient
itself must agree with the golden's under the arbiter's tolerance: a port whose gradient is
wrong is not excused by updating faithfully from it. A sparse gradient, a hand-written update or
one no rule covers is not judged so. Numpy only.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from ..store.audit import slots_by_var
from ..store.audit_result import LIMIT_ULPS
from ..store.update_check import NotAuditable, StepContext
from .stats import Stats, compare_values
from .tolerance import Tolerance

STATE_KINDS = ("var", "slot")


def owner(key: str, slots_meta: Mapping[str, Any]) -> Optional[str]:
    """The variable a "var/.." or "slot/.." key belongs to (None: another kind, or a slot the
    golden's metadata ties to no variable, as Adam's beta powers)."""
    kind, _, name = key.partition("/")
    if kind == "var":
        return name
    fact = slots_meta.get(name) if kind == "slot" else None
    return str(fact["var"]) if isinstance(fact, Mapping) and fact.get("var") else None


def by_update(meta: Mapping[str, Any], before: Mapping[str, Any], golden_step: Mapping[str, Any],
              values: Mapping[str, Any], stats: Mapping[str, Stats],
              tolerance: Tolerance) -> Tuple[Dict[str, Stats], Tuple[str, ...]]:
    """`stats` (key -> the float64 port's statistics against the golden at one step, under
    `tolerance`) with each failing variable and slot that the golden's update rule explains
    counted as agreeing, and those variables' names. `before`: the golden's state before the
    step; `golden_step`: its values at the step (the learning rates are read there); `values`:
    the float64 port's values at the step, under the golden's names."""
    slots_meta = meta.get("slots") if isinstance(meta.get("slots"), Mapping) else {}
    facts = meta.get("updates") if isinstance(meta.get("updates"), Mapping) else {}
    failing = {key: owner(key, slots_meta) for key, s in stats.items()
               if not s.ok and key.partition("/")[0] in STATE_KINDS}
    candidates = sorted({var for var in failing.values() if var is not None and isinstance(facts.get(var), Mapping)
                         and _gradient_agrees(stats, var)})
    state = {key: value for key, value in before.items() if key.partition("/")[0] in STATE_KINDS}
    after = {key: values[key] for key in values if key.partition("/")[0] in STATE_KINDS}
    step_values = {key: values[key] for key in values if key.partition("/")[0] == "grad"}
    step_values.update((key, golden_step[key]) for key in golden_step if key.startswith("lr/"))
    context = StepContext(state, after, step_values, (), 0, {}, (), LIMIT_ULPS)
    slots = slots_by_var(slots_meta)
    explained = []
    for var in candidates:
        fact = facts[var]
        try:
            expected = context.recomputed(var, str(fact.get("update") or ""), fact, slots.get(var, {}))
        except NotAuditable:
            continue
        if all(_agrees_with(expected[key], after[key], key, tolerance) for key in expected):
            explained.append(var)
    out = dict(stats)
    for key, var in failing.items():
        if var in explained:
            out[key] = copy.copy(stats[key])
            out[key].ok = True
    return out, tuple(explained)


def _agrees_with(expected: np.ndarray, actual: Any, key: str, tolerance: Tolerance) -> bool:
    kind, _, name = key.partition("/")
    return compare_values(expected, actual, tolerance.resolve(kind, name, 0, "float32")).ok


def _gradient_agrees(stats: Mapping[str, Stats], var: str) -> bool:
    """The variable's gradient is compared, and agrees."""
    found = stats.get("grad/" + var)
    return found is not None and found.ok
