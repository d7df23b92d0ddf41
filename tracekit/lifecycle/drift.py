"""How a golden's data changed when it was replaced: per kind of tensor, how many tensors
changed, by how much at most, and from which step, compared bit for bit."""

from __future__ import annotations

from typing import Dict, List

from ..comparison.engine import compare_data as compare
from ..keys import INITIAL_STEP, KIND_ORDER, split_key
from ..store import Trace
from ..store.provenance import KindDrift


def drift(replaced: Trace, new: Trace) -> List[KindDrift]:
    """One KindDrift per kind the replaced golden holds, in data-flow order. A tensor of the
    replaced golden that the new data lacks counts as changed (from the first step)."""
    result = compare(replaced, new, "exact")
    rows: Dict[str, List] = {}  # kind -> [tensors, changed, max_abs, max_rel, first_step]
    for tensor in result.tensors:
        row = rows.setdefault(tensor.kind, [0, 0, 0.0, 0.0, None])
        row[0] += 1
        if tensor.ok:
            continue
        row[1] += 1
        row[2] = _largest([row[2]] + [s.max_abs for s in tensor.by_step.values()])
        row[3] = _largest([row[3]] + [s.max_rel for s in tensor.by_step.values()])
        row[4] = _earliest(row[4], tensor.first_failed)
    for key in result.missing:
        row = rows.setdefault(split_key(key)[0], [0, 0, 0.0, 0.0, None])
        row[0] += 1
        row[1] += 1
        row[4] = _earliest(row[4], INITIAL_STEP if key in replaced.initial else 0)
    return [KindDrift(kind, n, changed, abs_err, rel_err, first)
            for kind, (n, changed, abs_err, rel_err, first) in sorted(rows.items(), key=lambda kv: KIND_ORDER[kv[0]])]


def _largest(values: List[float]) -> float:
    """The largest of the errors, a NaN (a value that became NaN) counting as infinite."""
    return max(float("inf") if v != v else v for v in values)


def _earliest(a, b):
    return b if a is None else a if b is None else min(a, b)
