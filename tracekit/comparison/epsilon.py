"""Adam's epsilon inside the square root on one side, outside on the other:
m / sqrt(v + eps) against m / (sqrt(v) + eps). TF1's AdamOptimizer and Keras' Adam put it
outside; hand-written updates (and RMSProp-style ones) often inside. The two differ where v is
near eps (inside) or sqrt(v) near eps (outside), in a way no other value of an epsilon in the
same place matches over elements of many magnitudes; fingerprints.py tries this only where
that value's fit (adam.py) explained nothing.

Each side's form is fitted as a whole: for each eps of a scan of decades, alpha and decay by
least squares; the eps leaving the smallest largest error refined (fitting.refined), then the
nearest usual epsilon that leaves as little to round-off. The golden's place is outside unless
the fit inside leaves under a quarter of what the fit outside leaves, and that beyond
round-off. The port's move is predicted with the golden's alpha and decay and the other
place's term, its eps fitted the same way (the usual epsilons, and the golden's value, taken
wherever they predict as well). The golden's move is not rescaled as adam.py does: the two
forms' ratio reaches thousands where v is near zero, and its round-off with it. Named where
the prediction passes the tolerance (fitting.explains). eps is fitted on at most SAMPLE
elements; the prediction is held on all.
numpy only; Python 3.7 syntax.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from .explained import Explained, largest
from .fitting import EPS32, LEFT, explains, f64, lstsq, refined
from .tolerance import Resolved

EPSILON_INSIDE = "epsilon-inside-sqrt"
GRID = tuple(10.0 ** (e / 4) for e in range(-14 * 4, 1))  # 1e-14 .. 1, four steps a decade
SLACK_ULPS = 4.0  # a fit leaving this many float32 ulps of the move's scale leaves round-off
# Elements eps is fitted from: a stride of the tensor, the elements of the smallest v (where an
# epsilon shows) and those the two sides differ most in. The prediction is then held on all.
SAMPLE = 1 << 16


def term(v: np.ndarray, eps: float, inside: bool) -> np.ndarray:
    """Adam's denominator: sqrt(v + eps) inside, sqrt(v) + eps outside."""
    return np.sqrt(np.maximum(v, 0.0) + eps) if inside else np.sqrt(np.maximum(v, 0.0)) + eps


def solve(move: np.ndarray, m: np.ndarray, v: np.ndarray, w: np.ndarray, eps: float,
          inside: bool) -> Optional[Dict[str, float]]:
    """alpha and decay of move = -alpha m / term - decay w at this eps, by least squares."""
    solution = lstsq([-m / term(v, eps, inside), -w], move)
    return None if solution is None else {"alpha": float(solution[0]), "eps": eps, "decay": float(solution[1])}


def step(p: Mapping[str, float], m: np.ndarray, v: np.ndarray, w: np.ndarray, inside: bool) -> np.ndarray:
    return -p["alpha"] * m / term(v, p["eps"], inside) - p["decay"] * w


def place_fit(move: np.ndarray, m: np.ndarray, v: np.ndarray, w: np.ndarray, inside: bool,
              epsilons: Sequence[float]) -> Optional[Tuple[Dict[str, float], float]]:
    """One side's move fitted with epsilon inside (or outside): alpha and decay by least squares
    at each eps of GRID, the eps leaving the smallest largest error refined, then the nearest
    usual epsilon leaving as little to round-off. (parameters, the largest error left)."""
    def left(eps: float) -> float:
        fitted = solve(move, m, v, w, eps, inside)
        return np.inf if fitted is None else largest(step(fitted, m, v, w, inside), move)
    # refined minimizes the largest error of a prediction: here the error itself, against zero
    best = refined({"eps": min((left(e), e) for e in GRID)[1]}, ["eps"], lambda p: np.full(1, left(p["eps"])),
                   np.zeros(1))["eps"]
    slack = SLACK_ULPS * EPS32 * max(float(np.max(np.abs(w))), float(np.max(np.abs(move))), 1e-30)
    best = next((e for e in sorted(epsilons, key=lambda e: abs(np.log(e / best))) if left(e) <= left(best) + slack),
                best)
    fitted = solve(move, m, v, w, best, inside)
    return None if fitted is None else (fitted, left(best))


def fit(key: str, start: Any, g_value: Any, a_value: Any, tol: Resolved, m: np.ndarray, v: np.ndarray,
        epsilons: Sequence[float]) -> Optional[Explained]:
    """The port's update as the golden's with epsilon on the other side of the square root,
    the golden's alpha and decay kept."""
    w, wanted = f64(start), f64(a_value)
    move = f64(g_value) - w
    s = sample(v, wanted - f64(g_value))
    outside = place_fit(move[s], m[s], v[s], w[s], False, epsilons)
    inside = place_fit(move[s], m[s], v[s], w[s], True, epsilons)
    if outside is None or inside is None:
        return None
    slack = SLACK_ULPS * EPS32 * max(float(np.max(np.abs(w))), float(np.max(np.abs(move))), 1e-30)
    golden_inside = outside[1] > slack and inside[1] < LEFT * outside[1]
    golden = inside[0] if golden_inside else outside[0]

    def predict(p: Mapping[str, float], at: Any = slice(None)) -> np.ndarray:
        return w[at] + step({**golden, "eps": p["eps"]}, m[at], v[at], w[at], not golden_inside)
    scanned = min((largest(predict({"eps": e}, s), wanted[s]), e) for e in GRID)
    eps = refined({"eps": scanned[1]}, ["eps"], lambda p: predict(p, s), wanted[s])["eps"]
    before = largest(f64(g_value), wanted)
    ulps = explains(predict({"eps": eps}), a_value, before, tol)
    if ulps is None:
        return None
    for value in sorted(set(epsilons) | {golden["eps"]}, key=lambda x: abs(np.log(x / eps))):
        snapped = explains(predict({"eps": value}), a_value, before, tol)
        if snapped is not None:
            eps, ulps = value, snapped
            break
    return Explained(key, EPSILON_INSIDE, golden["eps"], eps, ulps, {"inside": "golden" if golden_inside else "port"})


def sample(v: np.ndarray, difference: np.ndarray) -> Any:
    """The elements eps is fitted from (SAMPLE): all of a small tensor."""
    if v.size <= SAMPLE:
        return slice(None)
    k = SAMPLE // 4
    return np.unique(np.concatenate([np.arange(0, v.size, v.size // (SAMPLE // 2)), np.argpartition(v, k)[:k],
                                     np.argpartition(-np.abs(difference), k)[:k]]))
