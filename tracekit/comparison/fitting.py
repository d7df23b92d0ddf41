"""Fits of one update against another: least squares over a tensor's elements, and the search
for the fewest parameters whose change turns the golden's update into the port's within the
comparison's tolerance (fingerprints.py names them). numpy only; Python 3.7 syntax.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from .stats import compare_values
from .tolerance import Resolved

RTOL = 1e-3  # a fitted parameter that differs from the golden's by less is the golden's
LEFT = 0.25  # a fit must leave at most this fraction of the largest difference, and that within the tolerance
EPS32 = float(np.finfo(np.float32).eps)
FIT_ELEMENTS = 1 << 20  # elements a least-squares fit uses (a fixed stride over larger tensors)
# A fit needs this many elements per parameter it fits, or any few numbers fit (a one-element
# variable "explains" any difference as a factor).
ELEMENTS_PER_PARAMETER = 4


def f64(value: Any) -> np.ndarray:
    return np.asarray(value, np.float64).reshape(-1)


def lstsq(columns: Sequence[np.ndarray], target: np.ndarray) -> Optional[np.ndarray]:
    """Least squares over at most FIT_ELEMENTS elements, columns scaled to unit norm first (the
    moments, moves and weights differ by orders of magnitude). A column of zeros (a variable
    that starts at 0: no decay of it shows) gets 0; None where every column is."""
    if target.size < ELEMENTS_PER_PARAMETER * len(columns):
        return None
    stride = max(1, target.size // FIT_ELEMENTS)
    matrix = np.stack([c[::stride] for c in columns], axis=1)
    norms = np.linalg.norm(matrix, axis=0)
    used = norms > 0
    if not np.all(np.isfinite(matrix)) or not np.any(used):
        return None
    solution = np.zeros(len(columns))
    solution[used] = np.linalg.lstsq(matrix[:, used] / norms[used], target[::stride], rcond=None)[0] / norms[used]
    return solution


def explains(predicted: Any, actual: Any, before: float, tol: Resolved) -> Optional[float]:
    """The ulps a prediction of the port's value leaves, where it passes the comparison's
    tolerance and leaves at most LEFT of `before` (the largest difference the golden's own
    update leaves); None otherwise: a prediction that only nudges a difference under the
    tolerance explains nothing."""
    wanted = np.asarray(actual, np.float64)
    predicted = np.asarray(predicted, np.float64).reshape(wanted.shape)
    if not float(np.max(np.abs(predicted - wanted))) <= LEFT * before:
        return None
    stats = compare_values(predicted, wanted, tol)
    return stats.ulps if stats.ok else None


def smallest_change(names: Sequence[str], golden: Mapping[str, float], port: Mapping[str, float],
                     predict: Callable[[Mapping[str, float]], np.ndarray], actual: Any, tol: Resolved,
                     exact: Optional[Mapping[str, Sequence[float]]] = None,
                     ) -> Optional[Tuple[Dict[str, Tuple[float, float]], float]]:
    """The fewest parameters to take from the port's fit, in `names` order, for the golden's
    update to predict the port's value within the tolerance: (name -> (golden, port), the ulps
    left), or None where no set does. A parameter takes the nearest of its `exact` values (those
    a known transformation gives it) wherever the prediction still passes with it."""
    differ = [n for n in names if not same(golden[n], port[n])]
    wanted = np.asarray(actual, np.float64)
    before = float(np.max(np.abs(predict(golden).reshape(wanted.shape) - wanted)))

    def passes(values: Mapping[str, float]) -> Optional[float]:
        return explains(predict(values), wanted, before, tol)
    for size in range(1, len(differ) + 1):
        for subset in itertools.combinations(differ, size):
            chosen = refined({n: (port[n] if n in subset else golden[n]) for n in names}, subset, predict,
                              wanted.reshape(-1))
            ulps = passes(chosen)
            if ulps is None:
                continue
            for name in subset:
                for value in sorted((exact or {}).get(name, ()), key=lambda v: abs(v - chosen[name])):
                    snapped = passes({**chosen, name: value})
                    if snapped is not None:
                        chosen, ulps = {**chosen, name: value}, snapped
                        break
            return {n: (golden[n], chosen[n]) for n in subset}, ulps
    return None


def refined(chosen: Dict[str, float], subset: Sequence[str], predict: Callable[[Mapping[str, float]], np.ndarray],
             wanted: np.ndarray) -> Dict[str, float]:
    """The least-squares values tuned to the largest error, each within a factor of 2: the linear
    fit weighs every element alike, where an epsilon shows in the few whose sqrt(v) is near it."""
    def worst(values: Mapping[str, float]) -> float:
        return float(np.max(np.abs(predict(values).reshape(-1) - wanted)))
    best = dict(chosen)
    for _ in range(2):  # coordinate descent, twice round
        for name in subset:
            start = best[name]
            low, high = -1.0, 1.0  # golden-section search of log2(value / start)
            ratio = (np.sqrt(5) - 1) / 2
            for _ in range(40):
                a, b = high - ratio * (high - low), low + ratio * (high - low)
                if worst({**best, name: start * 2 ** a}) <= worst({**best, name: start * 2 ** b}):
                    high = b
                else:
                    low = a
            candidate = {**best, name: start * 2 ** ((low + high) / 2)}
            if worst(candidate) <= worst(best):
                best = candidate
    return best


def same(a: float, b: float) -> bool:
    return abs(a - b) <= RTOL * max(abs(a), abs(b), 1e-30)
