"""What a port's step returns: "loss", "lr" (or "learning_rate"), the golden's own "kind/name"
keys, other names kept as "fetch/<name>" (port_step.call_step). A "kind/name" key is checked
against the golden at the first step of its kind: a typo is an error, never a tensor silently
left out of the comparison."""

from __future__ import annotations

import difflib
from typing import Any, Mapping

from ..errors import ReplayError
from ..keys import replica_base, sparse_owner, split_key
from ..store import Trace

SHORTHANDS = ("loss/loss", "lr/learning_rate")  # what "loss" and "lr" become: the golden's names may be others


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
