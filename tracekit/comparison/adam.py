"""Adam's update as a golden holds it: the first and second moments verified from the golden's
gradient (their betas fitted), each side's move fitted to -alpha m / (sqrt(v) + eps) - decay W,
the golden's parameters snapped to the usual values, and the bias correction's factors at the
step counts a step may have had. numpy only; Python 3.7 syntax.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..keys import make_key, split_key
from ..store import Trace
from .fitting import EPS32, f64, lstsq, same

BIAS_T_MAX = 10_000  # the largest optimizer step count a bias-correction factor is matched at


def known_factors(betas: Optional[Tuple[float, float]], counts: Sequence[int]) -> List[float]:
    """The factors known transformations put on a step: a sign, Adam's bias correction (or its
    removal) at each step count the step may have had."""
    factors = [-1.0]
    if betas is not None:
        for t in counts:
            correction = float(np.sqrt(1 - betas[1] ** t) / (1 - betas[0] ** t))
            factors += [correction, 1 / correction]
    return factors


def counts(before: Mapping[str, Any], step: int, ahead: Mapping[str, int] = {}) -> Tuple[int, ...]:
    """The optimizer step counts a bias correction may use at `step`: the step's own count, and
    one more than each integer scalar variable of the state it started from (a step counter),
    and than that counter as far on as `ahead` says a replay moved it for the step ({counter
    name: offset}: the step's counter_reads, record/counter_reads.py)."""
    counts = [step + 1]
    for key, value in before.items():
        array = np.asarray(value)
        kind, name = split_key(key)
        if kind == "var" and array.size == 1 and array.dtype.kind in "iu":
            counts.append(int(array.reshape(-1)[0]) + 1)
            counts.append(counts[-1] + int(ahead.get(name, 0)))
    return tuple(sorted(set(c for c in counts if 0 < c <= BIAS_T_MAX)))


def adam_fits(start: Any, g_value: Any, a_value: Any, m: np.ndarray,
               v: np.ndarray) -> Optional[Tuple[Dict[str, float], Dict[str, float]]]:
    """Each side's Adam parameters (see _adam_fit), or None where either does not fit."""
    w = f64(start)
    root = np.sqrt(np.maximum(v, 0.0))
    golden_fit, port_fit = adam_fit(f64(g_value) - w, m, root, w), adam_fit(f64(a_value) - w, m, root, w)
    return None if golden_fit is None or port_fit is None else (golden_fit, port_fit)


def snapped(fit: Dict[str, float], move: np.ndarray, m: np.ndarray, root: np.ndarray, w: np.ndarray,
             exact: Mapping[str, Sequence[float]]) -> Dict[str, float]:
    """The golden's Adam parameters, each at the nearest of its `exact` values where that fits the
    golden's own move as well, to an ulp of the variable: a fit of few elements is noisy."""
    def worst(p: Mapping[str, float]) -> float:
        return float(np.max(np.abs(move + p["alpha"] * m / (root + p["eps"]) + p["decay"] * w)))
    slack = EPS32 * max(float(np.max(np.abs(w))), float(np.max(np.abs(move))), 1e-30)
    out = dict(fit)
    for name, values in exact.items():
        for value in sorted(values, key=lambda x: abs(x - out[name])):
            if worst({**out, name: value}) <= worst(out) + slack:
                out[name] = value
                break
    return out


def adam_fit(move: np.ndarray, m: np.ndarray, root: np.ndarray, w: np.ndarray) -> Optional[Dict[str, float]]:
    """move = -alpha m / (root + eps) - decay w, as the linear system
    move root = -alpha m - eps move - decay w root - (decay eps) w."""
    solution = lstsq([-m, -move, -w * root, -w], move * root)
    if solution is None or not solution[0] != 0:  # a negative alpha: the step's sign flipped
        return None
    return {"alpha": float(solution[0]), "eps": float(solution[1]), "decay": float(solution[2])}


def slot_steps(golden: Trace, name: str, before: Mapping[str, Any], recorded: Mapping[str, Any]
               ) -> Optional[Tuple[np.ndarray, List[Tuple[np.ndarray, np.ndarray]]]]:
    """The golden's gradient of variable `name` at a step, and (after, before) the step of each of
    its slots (meta "slots") shaped like it, in float64; None without the gradient. What an
    optimizer's recursions (Adam's moments, Momentum's accumulator) are verified on."""
    grad_key = make_key("grad", name)
    if grad_key not in recorded:
        return None
    g = f64(recorded[grad_key])
    out = []
    for slot, info in (golden.meta.get("slots") or {}).items():
        key = make_key("slot", slot)
        if not isinstance(info, dict) or info.get("var") != name or key not in recorded or key not in before:
            continue
        new, old = f64(recorded[key]), f64(before[key])
        if new.shape == g.shape == old.shape:
            out.append((new, old))
    return g, out


def moments(golden: Trace, name: str, before: Mapping[str, Any],
             recorded: Mapping[str, Any]) -> Optional[Tuple[np.ndarray, np.ndarray, Tuple[float, float]]]:
    """The variable's first and second moments after the step, and their betas, where two of its
    slots are verified at this step to follow Adam's recursions from the golden's gradient."""
    stepped = slot_steps(golden, name, before, recorded)
    if stepped is None:
        return None
    g, slots = stepped
    found: Dict[str, Tuple[np.ndarray, float]] = {}
    for new, old in slots:
        for role, source in (("m", g), ("v", g * g)):
            beta = recursion(new, old, source)
            if beta is not None and role not in found:
                found[role] = (new, beta)
                break
    if "m" not in found or "v" not in found:
        return None
    return found["m"][0], found["v"][0], (found["m"][1], found["v"][1])


def recursion(new: np.ndarray, old: np.ndarray, source: np.ndarray) -> Optional[float]:
    """beta with new = beta old + (1 - beta) source to float32 round-off, if one exists in (0, 1)."""
    target, basis = new - source, old - source
    denominator = float(np.dot(basis, basis))
    if denominator == 0:
        return None
    beta = float(np.dot(target, basis)) / denominator
    if not 0 < beta < 1:
        return None
    error = np.abs(beta * old + (1 - beta) * source - new)
    scale = max(float(np.abs(new).max()), 1e-30)
    return beta if float(error.max()) <= 64 * np.finfo(np.float32).eps * scale else None


def bias_step(ratio: float, betas: Optional[Tuple[float, float]], counts: Sequence[int]) -> Optional[Tuple[int, bool]]:
    """(t, the port corrects) where ratio is Adam's bias correction sqrt(1 - b2^t) / (1 - b1^t) at
    one of the step counts t the step may have had (or its inverse). Only those: over all t the
    factor takes most values (2.0 at t = 287 for Adam's defaults)."""
    if betas is None:
        return None
    b1, b2 = betas
    for t in counts:
        factor = np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        if same(ratio, factor):
            return t, True
        if same(ratio, 1 / factor):
            return t, False
    return None
