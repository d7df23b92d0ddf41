"""Round-off an update carries past the tolerance of its own size.

Another machine's kernels sum a batch in another order: a gradient differs in its last bits and
passes. An update can make that difference larger than its result's own tolerance: Adagrad adds
g squared (a SUM loss's gradients reach 1e2, its accumulators 1e5), so one ulp of g becomes
hundreds of ulps of the accumulator's smaller elements. Such a failure is accepted, at a step
whose start the comparison knows (step 0: the golden's initial state, which the replay loaded),
when it is verified to be only that:
- the variable's gradient and the step's learning rates passed;
- the port's new variable and slots are what the golden's own update rule (its recorded TF1
  update op and settings) makes of that start and the port's gradient and learning rate,
  recomputed in float64 within the audit's round-off bound (store/audit.py).
So the port updated as TF1 did, and its inputs differ by what the tolerance accepts: the
difference is theirs, carried. A port with another update (an epsilon, a bias correction, a
momentum convention) disagrees with the rule and still fails.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Set

from ..keys import make_key, sparse_owner, split_key
from ..store.audit import audit_step
from ..store.audit_result import AGREES
from .noise import UPDATE, Noise


def carried(golden: Any, index: int, failing: Iterable[str], passed: Set[str], actual: Mapping[str, Any],
            start: Mapping[str, Any]) -> Dict[str, Noise]:
    """The failing "var/.." and "slot/.." keys of step `index` that the update carried, with why.
    `passed`: the keys of this step that passed; `actual`: the replay's values of the step;
    `start`: the state ("var/..", "slot/..") the step started from."""
    meta = golden.meta
    facts = meta.get("updates") if isinstance(meta.get("updates"), Mapping) else None
    if not facts:
        return {}
    slots = meta.get("slots") if isinstance(meta.get("slots"), Mapping) else {}
    owners = {name: str(entry.get("var")) for name, entry in slots.items() if isinstance(entry, Mapping)}
    wanted: Dict[str, Set[str]] = {}  # variable -> its failing keys
    for key in failing:
        owner = _owner(key, owners)
        if owner is not None and owner in facts:
            wanted.setdefault(owner, set()).add(key)
    rates = [key for key in actual if split_key(key)[0] == "lr"]
    if not wanted or any(key not in passed for key in rates):
        return {}
    gradients: Dict[str, List[str]] = {var: [] for var in wanted}  # a dense gradient, or a sparse one's parts
    for key in actual:
        kind, name = split_key(key)
        owner = sparse_owner(name) or name if kind == "grad" else None
        if owner in gradients:
            gradients[owner].append(key)
    ready = {var for var in wanted if gradients[var] and all(k in passed for k in gradients[var])}
    if not ready:
        return {}
    rated = {key: actual[key] for key in rates}
    owned: Dict[str, List[str]] = {}
    for key in actual:
        owned.setdefault(_owner(key, owners) or "", []).append(key)
    out = {}
    for var in ready:  # one variable's values at a time: a step's whole state, in a float64 port, is gigabytes
        state = {key: actual[key] for key in owned.get(var, ())}
        values = dict(rated, **{k: actual[k] for k in gradients[var]})
        for found in audit_step({var: facts[var]}, slots, start, state, values, step=index).variables:
            if found.verdict == AGREES:
                out.update((key, Noise(index, key, UPDATE, make_key("grad", found.var))) for key in wanted[found.var])
    return out


def _owner(key: str, owners: Mapping[str, str]) -> "str | None":
    """The variable a "var/.." or "slot/.." key belongs to (None for other kinds)."""
    kind, name = split_key(key)
    return name if kind == "var" else owners.get(name) if kind == "slot" else None
