"""A compared step judged (the streaming comparer: comparer.py): each tensor's statistics
recorded in data-flow order, and which of its failures amplified round-off explains (noise.py)
or an update carried (carried.py); the first divergence and the first only explained failures
make."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Tuple

from ..store.digest import Digest
from .noise import Noise, NoiseTracker
from .result import Comparison, Divergence, TensorResult
from .stats import Stats
from .tolerance import Resolved

# A step's (tensor, stats, and for a failing one: golden, actual, tolerance), in data-flow order.
Compared = List[Tuple[TensorResult, Stats, Optional[Tuple[Any, Any, Resolved]]]]


def judge_step(result: Comparison, index: int, compared: Compared, noise: NoiseTracker,
               firsts: Tuple[Optional[Divergence], Optional[Divergence]],
               carried_over: Optional[Mapping[str, Noise]] = None) -> Tuple[Optional[Divergence], Optional[Divergence]]:
    """Record a step's statistics, in data-flow order, and which failures amplified round-off
    explains; `firsts`: the first divergence so far, and the first only explained failures make,
    both as they are after this step; `carried_over`: failures verified to be round-off an update
    carried (carried.py), accepted whatever the tolerance says of noise."""
    tolerance = result.tolerance
    first, explained_first = firsts
    noise.gradients([(t.name, s) for t, s, _ in compared if t.kind == "grad"],
                    [s for t, s, _ in compared if t.kind == "loss"])
    for tensor, stats, failed in compared:
        # Integers and booleans (ids, indices, masks) never differ by round-off: never noise. From
        # a digest only the statistics are known: the noise tracker gets no values.
        if failed is not None and isinstance(failed[0], Digest):
            failed = (None, None, failed[2])
        verified = (carried_over or {}).get(tensor.key) if failed is not None else None
        explained = verified or (None if failed is None or stats.discrete or stats.problem else
                                 noise.explain(index, tensor.kind, tensor.name, *failed))
        tensor.add(index, stats, explained, tolerance.accept_noise or verified is not None)
        if failed is None:
            continue
        if explained is not None:
            if len(tensor.noise) == 1:
                result.noise.append(explained)
            if explained_first is None and not tolerance.accept_noise and verified is None:
                explained_first = Divergence(index, tensor.kind, tensor.name, stats, explained)
        elif first is None:
            first = Divergence(index, tensor.kind, tensor.name, stats)
    noise.end_step()
    return first, explained_first
