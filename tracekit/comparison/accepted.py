"""A comparison's failing steps, and the failures an explanation accepts (an arbiter's, a
race's, a crossing's): the first divergence then moves to the first failure left."""

from __future__ import annotations

from typing import AbstractSet, Dict, List, Optional, Tuple

from ..keys import KIND_ORDER
from .result import Comparison, Divergence
from .stats import Stats


def failing(tensor_ok: bool, step: int, noise_steps: object, accept_noise: bool) -> bool:
    return not tensor_ok and not (accept_noise and step in noise_steps)  # type: ignore[operator]


def failing_steps(result: Comparison) -> List[Tuple[int, Dict[str, Stats]]]:
    """(step, {key: stats}) of every step where some tensor fails, unaccepted, in step order."""
    steps: Dict[int, Dict[str, Stats]] = {}
    for tensor in result.tensors:
        for step, stats in tensor.by_step.items():
            if failing(stats.ok, step, tensor.noise, result.tolerance.accept_noise):
                steps.setdefault(step, {})[tensor.key] = stats
    return sorted(steps.items())


def accept(result: Comparison, explained: AbstractSet[int]) -> None:
    """Count the failures of the `explained` steps as accepted, beside those an earlier call
    accepted; the first divergence becomes the first failure at another step."""
    if not explained:
        return
    first: Optional[Tuple[Tuple[int, Tuple[int, int]], Divergence]] = None
    for order, tensor in enumerate(result.tensors):
        still = []
        for step, stats in tensor.by_step.items():
            if step in tensor.judged_steps or not failing(stats.ok, step, tensor.noise, result.tolerance.accept_noise):
                continue
            if step in explained:
                tensor.failed_steps -= 1
                tensor.accepted_steps += 1
                tensor.judged_steps.add(step)
            else:
                still.append(step)
        tensor.first_failed = still[0] if still else None
        # within a step, data-flow order: by kind, then as the tensors came (their order within a kind)
        rank = (KIND_ORDER.get(tensor.kind, len(KIND_ORDER)), order)
        if still and (first is None or (still[0], rank) < first[0]):
            first = ((still[0], rank), Divergence(still[0], tensor.kind, tensor.name, tensor.by_step[still[0]]))
    was = result.first_divergence
    if was is None or was.step in explained:
        result.first_divergence = None if first is None else first[1]
