"""A golden step made of micro-batch runs (gradients accumulated over them, record/accumulation.py),
as a replay drives it: its inputs, draws and losses hold each micro-batch's along a first axis
(step info "micro_batches": N). The port's step gets the inputs stacked and loops over the first
axis, as TF2 code accumulates; the random tape hands out the draws micro-batch by micro-batch,
in the order the TF1 runs drew them, and what the port drew is stacked again to be compared.
Framework-neutral: numpy only."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np

MICRO_BATCHES = "micro_batches"  # the step info's count of micro-batch runs


def micro_batches(info: Mapping[str, Any]) -> int:
    """How many micro-batch runs a golden step is made of (0: it is one run)."""
    count = info.get(MICRO_BATCHES) if isinstance(info, Mapping) else None
    return int(count) if isinstance(count, int) and count > 0 else 0


def unstacked(draws: List[Tuple[str, Any]], count: int) -> List[Tuple[str, Any]]:
    """A micro-batch step's draws, one micro-batch after another (each draw's first axis taken)."""
    if not count:
        return draws
    return [(name, np.asarray(value)[i]) for i in range(count) for name, value in draws]


def restacked(names: Sequence[str], taken: Sequence[Any], count: int) -> Dict[str, Any]:
    """The draws the port took, by the golden's name, stacked again along a first axis where a
    name was drawn once per micro-batch (else the port's own order: names that do not fit)."""
    grouped: Dict[str, List[Any]] = {}
    for i, value in enumerate(taken):
        name = names[i] if i < len(names) else "tf2-draw-%d" % i
        grouped.setdefault(name, []).append(value)
    out: Dict[str, Any] = {}
    for name, values in grouped.items():
        same = len({np.shape(v) for v in values}) == 1
        out[name] = np.stack(values) if count and len(values) == count and same else values[0]
    return out
