"""What a tensor the replay lacks is, so a user can tell a port's gap from TF1's bookkeeping.

A golden holds what the TF1 step computed; some of it a port never computes as a tensor of
its own: a rate an optimizer works out inside its update (TF1 Adam's sparse path divides its
learning rate there), its power accumulators. The hint names the TF1 op that made the missing
tensor, says whether it lies inside an optimizer's update, and how to leave it out (a tolerance
rule with ignore = true, which covers a missing tensor as it covers a present one).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Set

from ..keys import split_key


def _optimizer_scopes(meta: Mapping[str, Any]) -> Set[str]:
    """The name scopes of the recorded updates' optimizers ("Adam" of "Adam/learning_rate:0")."""
    updates = meta.get("updates") if isinstance(meta.get("updates"), dict) else {}
    scopes = set()
    for update in updates.values():
        rate = update.get("lr") if isinstance(update, dict) else None
        if isinstance(rate, str) and "/" in rate:
            scopes.add(rate.split("/")[0])
    return scopes


def missing_hint(meta: Mapping[str, Any], key: str) -> str:
    """Why `key` may be missing from a replay, and what to do, from the golden's metadata."""
    kind, name = split_key(key)
    op = name.rsplit(":", 1)[0] if re.search(r":\d+$", name) else None
    rule = "[[rule]] kind = \"%s\", name = \"%s\", ignore = true" % (kind, name)
    if op is None:
        return "the port's step returned no %s %r: return it from the step, or leave it out with %s" % (
            kind, name, rule)
    bookkeeping = "/update_" in op or op.split("/")[0] in _optimizer_scopes(meta)
    if bookkeeping:
        return ("made by TF1's op %s, inside an optimizer's update: the optimizer's own bookkeeping, which a port's "
                "optimizer computes without a tensor of its own. If the rest agrees, leave it out: %s (or record "
                "again naming the rate: tracekit record --learning-rate NAME)" % (op, rule))
    return ("made by TF1's op %s, which the port's step does not give back as %s %r: return it from the step "
            "under that name, or leave it out with %s" % (op, kind, name, rule))
