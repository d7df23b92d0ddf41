"""Momentum's conventions: where one of a variable's slots is verified at the step to be TF1's
MomentumOptimizer accumulator (accum' = mu accum + g with the golden's gradient g, mu fitted
from the golden's state and the step's values, as adam.moments verifies Adam's), each side's
move is fitted to

    -lr (a accum' + b g)

with the golden's accum'. Plain momentum (var -= lr accum') is (a, b) = (1, 0), TF1's Nesterov
(use_nesterov=True: var -= lr (g + mu accum')) is (mu, 1). A port whose momentum factor is
mu_p accumulates mu_p accum + g = k accum' + (1 - k) g with k = mu_p / mu, which gives

    plain:    (a, b) = (k, 1 - k)        Nesterov: (a, b) = (mu_p k, 1 + mu_p (1 - k)).

The golden's form is the one that predicts its own move; the port's is fitted under both
forms, and the one changing the fewest of (nesterov, mu, lr) from the golden's to predict the
port's value within the tolerance is named. Keras' SGD (velocity = mu v - lr g; var += v) moves
a variable as TF1's does at a constant rate (v = -lr accum): no name. At a step whose
accumulator starts at zero (TF1's first) mu is not told, and Nesterov is a factor of the rate
(1 + mu): the learning-rate factor names it. numpy only; Python 3.7 syntax.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..store import Trace
from .adam import slot_steps
from .explained import Explained, largest
from .fitting import EPS32, f64, lstsq, same, smallest_change
from .stats import compare_values
from .tolerance import Resolved

NESTEROV = "nesterov"
MOMENTUM = "momentum-factor"
LR_FACTOR = "lr-factor"  # fingerprints.LR_FACTOR, named here where a momentum fit changes the rate
MOMENTA = (0.9, 0.99, 0.95, 0.5, 0.8, 0.999, 0.0)  # the momentum factors teams pass
NO_MOMENTUM = 1e-3  # a port's fitted mu within this of 0 (or of 1 above) is one
RECURSION_ULPS = 64.0  # an accumulator follows its recursion to this many float32 ulps of its scale


@dataclass(frozen=True)
class Accumulator:
    """A variable's momentum slot at a step: its value after the step, the golden's gradient and mu."""

    new: np.ndarray
    grad: np.ndarray
    mu: float


def accumulator(golden: Trace, name: str, before: Mapping[str, Any],
                recorded: Mapping[str, Any]) -> Optional[Accumulator]:
    """The variable's slot (meta "slots": slot name -> {"var", "arg"}) that follows accum' =
    mu accum + g from the golden's state at this step, where one does (and is not zero before it)."""
    stepped = slot_steps(golden, name, before, recorded)
    if stepped is None:
        return None
    g, slots = stepped
    for new, old in slots:
        mu = _factor(new, old, g)
        if mu is not None:
            return Accumulator(new, g, mu)
    return None


def starts_accumulating(golden: Trace, name: str, before: Mapping[str, Any], recorded: Mapping[str, Any]) -> bool:
    """The variable has a slot at zero before this step that holds the golden's gradient after it:
    TF1's momentum accumulator at its first step (accum' = mu 0 + g, whatever mu)."""
    stepped = slot_steps(golden, name, before, recorded)
    if stepped is None:
        return False
    g, slots = stepped
    scale = max(float(np.max(np.abs(g))), 1e-30) if g.size else 1e-30
    return any(not np.any(old) and float(np.max(np.abs(new - g))) <= RECURSION_ULPS * EPS32 * scale
               for new, old in slots)


def nesterov_at_start(factor: float) -> Optional[float]:
    """The momentum factor mu (of MOMENTA) with 1 + mu = `factor`: Nesterov's step where the
    accumulator starts at zero moves 1 + mu times as far as plain momentum's."""
    return next((mu for mu in MOMENTA if mu > 0 and same(1.0 + mu, factor)), None)


def _factor(new: np.ndarray, old: np.ndarray, g: np.ndarray) -> Optional[float]:
    """mu with new = mu old + g to float32 round-off, if one exists in (0, 1]."""
    energy = float(np.dot(old, old))
    if energy == 0 or not np.all(np.isfinite(new)):
        return None
    mu = float(np.dot(new - g, old)) / energy
    scale = max(float(np.max(np.abs(new))), 1e-30)
    error = float(np.max(np.abs(mu * old + g - new)))
    return mu if 0 < mu <= 1 and error <= RECURSION_ULPS * EPS32 * scale else None


def _coefficients(mu: float, p: Mapping[str, float]) -> Tuple[float, float]:
    """(a, b) of the port's move -lr (a accum' + b g) at momentum p["mu"], Nesterov's share
    p["nesterov"] (0 or 1), the golden's accum' accumulated at `mu`."""
    k, n = p["mu"] / mu, p["nesterov"]
    return (1 - n) * k + n * p["mu"] * k, (1 - n) * (1 - k) + n * (1 + p["mu"] * (1 - k))


def _port_forms(mu: float, x: np.ndarray) -> List[Dict[str, float]]:
    """The port's (nesterov, mu, lr) from its fitted coefficients x of (accum', g), in each form."""
    out = []
    total = float(x[0] + x[1])
    if total != 0:  # plain: x = -lr (k, 1 - k)
        out.append({"nesterov": 0.0, "mu": mu * float(x[0]) / total, "lr": -total})
    if x[1] != 0:  # Nesterov: x0 / x1 = r = mu k^2 / (1 + mu k (1 - k)), k > 0
        r = float(x[0] / x[1])
        disc = (r * mu) ** 2 + 4 * mu * (1 + r) * r
        if 1 + r > 0 and disc >= 0:
            k = (r * mu + np.sqrt(disc)) / (2 * mu * (1 + r))
            out.append({"nesterov": 1.0, "mu": mu * k, "lr": -float(x[1]) / (1 + mu * k * (1 - k))})
    # a port without momentum fits a mu of round-off either side of 0
    return [p for p in out if p["lr"] > 0 and -NO_MOMENTUM < p["mu"] <= 1 + NO_MOMENTUM]


def fit(key: str, start: Any, g_value: Any, a_value: Any, tol: Resolved, acc: Accumulator) -> List[Explained]:
    """The momentum conventions that turn the golden's update into the port's, [] where none does."""
    w = f64(start)
    columns = [acc.new, acc.grad]
    golden_form = _golden_form(w, f64(g_value), g_value, columns, acc.mu, tol)
    fitted = lstsq(columns, f64(a_value) - w)
    if golden_form is None or fitted is None:
        return []

    def predict(p: Mapping[str, float]) -> np.ndarray:
        a, b = _coefficients(acc.mu, p)
        return w - p["lr"] * (a * acc.new + b * acc.grad)
    best: Optional[Tuple[Dict[str, Tuple[float, float]], float]] = None
    # the golden's form first: of two explanations as short, the one keeping Nesterov as it was
    for port in sorted(_port_forms(acc.mu, fitted), key=lambda p: p["nesterov"] != golden_form["nesterov"]):
        found = smallest_change(["nesterov", "mu", "lr"], golden_form, port, predict, a_value, tol,
                                 {"nesterov": (0.0, 1.0), "mu": MOMENTA})
        if found is not None and "nesterov" in found[0] and found[0]["nesterov"][1] not in (0.0, 1.0):
            continue  # a fraction of Nesterov's is no convention
        if found is not None and (best is None or len(found[0]) < len(best[0])):
            best = found
    if best is None:
        return []
    changed, ulps = best
    out = []
    for name, (g, a) in changed.items():
        if same(g, a):  # a parameter the search took back to the golden's value: unchanged
            continue
        if name == "nesterov":
            out.append(Explained(key, NESTEROV, g, a, ulps, {"mu": acc.mu}))
        elif name == "mu":
            out.append(Explained(key, MOMENTUM, g, a, ulps, {"nesterov": golden_form["nesterov"]}))
        else:
            out.append(Explained(key, LR_FACTOR, 1.0, a / g, ulps, {}))
    return out


def _golden_form(w: np.ndarray, g: np.ndarray, g_value: Any, columns: List[np.ndarray], mu: float,
                 tol: Resolved) -> Optional[Dict[str, float]]:
    """The golden's (nesterov, mu, lr): the form whose rate, fitted by least squares, predicts
    its own value within the tolerance, the closer of the two where both do."""
    move = g - w
    best: Optional[Tuple[float, Dict[str, float]]] = None
    for nesterov in (0.0, 1.0):
        p = {"nesterov": nesterov, "mu": mu, "lr": 1.0}
        a, b = _coefficients(mu, p)
        column = -(a * columns[0] + b * columns[1])
        rate = lstsq([column], move)
        if rate is None or not rate[0] > 0:
            continue
        predicted = w + rate[0] * column
        if compare_values(predicted.reshape(np.shape(g_value)), np.asarray(g_value, np.float64), tol).ok:
            left = largest(predicted, g_value)
            if best is None or left < best[0]:
                best = (left, {**p, "lr": float(rate[0])})
    return None if best is None else best[1]
