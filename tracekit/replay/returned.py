"""What a port's step returns: "loss", "lr" (or "learning_rate"), the golden's own "kind/name"
keys, other names kept as "fetch/<name>" (port_step.call_step). A "kind/name" key is checked
against the golden at the first step of its kind: a typo is an error, never a tensor silently
left out of the comparison."""

from __future__ import annotations

import difflib
from typing import Any, Callable, Dict, Mapping, Optional

import numpy as np

from ..errors import ReplayError
from ..keys import make_key, replica_base, sparse_owner, split_key
from ..store import Trace

SHORTHANDS = ("loss/loss", "lr/learning_rate")  # what "loss" and "lr" become: the golden's names may be others


def called(step_fn: Callable[..., Any], tensors: Dict[str, Any], inputs: Optional[Mapping[str, str]],
           *leading: Any) -> Any:
    """The port's step called on one step's inputs: one dict {golden input name: tensor}
    (inputs=None) or keywords ({golden input name: keyword}), after `leading` (a functional
    port's state)."""
    if inputs is None:
        return step_fn(*leading, tensors)
    missing = [name for name in inputs if name not in tensors]
    if missing:
        raise ReplayError("inputs= names golden inputs %s, but the step records only %s"
                          % (", ".join(missing), ", ".join(sorted(tensors))))
    return step_fn(*leading, **{keyword: tensors[name] for name, keyword in inputs.items()})


def named(result: Any, numpy: Callable[[str, Any], np.ndarray]) -> Dict[str, np.ndarray]:
    """What a step returned (nothing, its loss, or a dict) as {"kind/name": array}: "loss" and
    "lr"/"learning_rate" as SHORTHANDS, other names without a kind as fetch/<name>; numpy(the
    name as returned, value) makes each an array (and refuses what it cannot)."""
    if result is None:
        return {}
    if not isinstance(result, dict):
        result = {"loss": result}
    out = {}
    for given, value in result.items():
        key = given
        if "/" not in key:
            key = {"loss": SHORTHANDS[0], "lr": SHORTHANDS[1], "learning_rate": SHORTHANDS[1]}.get(
                key, make_key("fetch", key))
        out[key] = numpy(given, value)
    return out


def check_returned(golden: Trace, returned: Mapping[str, Any], index: int) -> None:
    """Each "kind/name" key of `returned` names a golden tensor or a form of it (a sparse
    gradient's parts, a replica's copy); else a ReplayError naming the nearest golden keys."""
    known = [t.key for t in golden.catalog]
    bases = set(known) | {sparse_owner(key) for key in known if sparse_owner(key)}
    for key in returned:
        base = replica_base(sparse_owner(key) or key)
        if split_key(key)[0] == "fetch" or key in bases or base in bases or key in SHORTHANDS:
            continue
        near = difflib.get_close_matches(key, known, n=3, cutoff=0.5)
        raise ReplayError("step %d: the step returned %r, which %s does not hold%s. A step returns \"loss\", "
                          "\"lr\", other names (kept as fetch/<name>) or the golden's own \"kind/name\" keys "
                          "(docs/REPLAY.md); tracekit show lists them"
                          % (index, key, golden.path, "; nearest: %s" % ", ".join(near) if near else ""))
