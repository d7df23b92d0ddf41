"""Round-off that training amplifies, followed link by link through a comparison.

Some gradients are pure round-off: a dense bias right before batch norm has a true gradient
of zero, and what TensorFlow computes is rounding noise. Adam divides by sqrt(v) and turns
that noise into real updates with random signs, so a correct port's bias departs from the
golden after one step, and whatever sees the bias without reaching the loss (batch norm's
moving mean, a tap before batch norm) departs after it. Each link is checked on the numbers:

- GRADIENT: a gradient whose golden values and difference are at its step's noise floor
  (NOISE_FLOOR times the step's median gradient scale).
- DRIVEN: a variable whose gradient has been at the noise floor at every step so far, and its
  optimizer slots: all the optimizer ever saw of it was noise.
- FOLLOWS: a tap, or a variable no gradient trains (moving statistics), at a step where the
  loss and every gradient above the noise floor agree, and whose error is, element by element,
  within the tolerance plus the largest error the driven variables had before this step
  (broadcast over trailing axes: a bias's channel). A moving average of a shifted mean moves
  by no more than the shift.

Tolerance(accept_noise=True) accepts the explained failures (Tolerance.training() does);
otherwise they still fail and the report says what they are.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

import numpy as np

from ..keys import make_key
from .stats import Stats
from .tolerance import Resolved

# A gradient this much smaller than the step's typical gradient is round-off: a sum that
# cancels (docs/NUMERICS.md).
NOISE_FLOOR = 1e-5

GRADIENT, DRIVEN, FOLLOWS = "gradient", "driven", "follows"
# An update carried its accepted inputs' round-off past its own tolerance (comparison/carried.py): accepted
# at every tolerance, being verified.
UPDATE = "update"


@dataclass(frozen=True)
class Noise:
    """Why a failing tensor is explained noise: `link` is GRADIENT, DRIVEN or FOLLOWS, `source`
    the noise-floor gradient's key (for FOLLOWS, the driven variable's)."""

    step: int
    key: str
    link: str
    source: str


def slot_owner(slot: str, variables: Iterable[str]) -> Optional[str]:
    """The variable an optimizer slot belongs to, by name: TF1 names slots "<var>/Adam:0",
    Keras "<optimizer>/<var>/m:0". The longest variable name found as whole path segments."""
    path = "/" + (slot[:-2] if slot.endswith(":0") else slot) + "/"
    best = None
    for name in variables:
        base = name[:-2] if name.endswith(":0") else name
        if "/" + base + "/" in path and (best is None or len(name) > len(best)):
            best = name
    return best


def _floor_names(grads: List[Tuple[str, Stats]]) -> Set[str]:
    """Gradients at their step's noise floor: golden values and difference both tiny next to
    the step's median gradient scale."""
    scales = [s.golden_scale for _, s in grads if s.golden_scale > 0 and not s.discrete]
    if len(scales) < 2:
        return set()
    floor = NOISE_FLOOR * statistics.median(scales)
    return {name for name, s in grads
            if not s.problem and not s.discrete and s.golden_scale <= floor and s.max_abs <= 2 * floor}


class NoiseTracker:
    """Follows noise through one comparison, step by step: `gradients` once a step's gradients
    are compared, then `explain` for each failing tensor of that step, then `end_step`."""

    def __init__(self, trained: Iterable[str], slots: Iterable[str]) -> None:
        self._trained = set(trained)  # variable names the golden has gradients for
        self._owner = {slot: slot_owner(slot, self._trained) for slot in slots}
        self._always: Dict[str, bool] = {}  # gradient name -> at the floor at every step compared so far
        self._budget: Dict[str, Tuple[str, np.ndarray]] = {}  # driven variable -> (source, max |error| so far)
        self._pending: Dict[str, Tuple[str, np.ndarray]] = {}  # this step's, counted from the next step on
        self._floor: Set[str] = set()
        self._clean = False

    def gradients(self, grads: List[Tuple[str, Stats]], losses: List[Stats]) -> Set[str]:
        """Take a step's compared gradients and losses; returns the gradients at the floor."""
        self._floor = _floor_names(grads)
        for name, _ in grads:
            self._always[name] = self._always.get(name, True) and name in self._floor
        # What follows from noise must not reach the training signal.
        self._clean = all(s.ok for s in losses) and all(s.ok for name, s in grads if name not in self._floor)
        return self._floor

    def explain(self, step: int, kind: str, name: str, golden: Any, actual: Any, tol: Resolved) -> Optional[Noise]:
        """Why this failing tensor is noise, or None."""
        key = make_key(kind, name)
        if kind == "grad":
            return Noise(step, key, GRADIENT, key) if name in self._floor else None
        if self.driven(kind, name):
            owner = name if kind == "var" else self._owner[name]
            source = make_key("grad", owner)
            if kind == "var":
                error = _error(golden, actual)
                if error is not None:
                    held = self._pending.get(name)
                    self._pending[name] = (source, error if held is None else np.maximum(held[1], error))
            return Noise(step, key, DRIVEN, source)
        if kind not in ("tap", "var") or name in self._trained or not self._budget or not self._clean:
            return None
        source = self._within_budget(golden, actual, tol)
        return None if source is None else Noise(step, key, FOLLOWS, source)

    def driven(self, kind: str, name: str) -> bool:
        """Whether round-off alone has moved this tensor so far: a gradient at the noise floor
        at every step, or the variable it updates, or that variable's slots."""
        if kind == "grad":
            return self._always.get(name, False)
        owner = name if kind == "var" else self._owner.get(name) if kind == "slot" else None
        return owner is not None and self._always.get(owner, False)

    def end_step(self) -> None:
        for name, (source, error) in self._pending.items():
            held = self._budget.get(name)
            self._budget[name] = (source, error if held is None else np.maximum(held[1], error))
        self._pending = {}

    def _within_budget(self, golden: Any, actual: Any, tol: Resolved) -> Optional[str]:
        """The driven variable whose error so far covers this tensor's, element by element
        beyond the tolerance; None if none does."""
        error = _error(golden, actual)
        if error is None:
            return None
        g = np.abs(np.asarray(golden, dtype=np.float64))
        allowed = tol.atol + tol.rtol * g + tol.ulps * tol.eps * float(g.max(initial=0.0))
        for name, (source, budget) in sorted(self._budget.items()):
            if budget.ndim == 0 or budget.shape != error.shape[error.ndim - budget.ndim:]:
                continue  # not a per-channel quantity of this tensor
            if bool(np.all(error <= budget + allowed)):
                return make_key("var", name)
        return None


def _error(golden: Any, actual: Any) -> Optional[np.ndarray]:
    """|actual - golden| in float64, or None where it does not apply (shapes, non-finite, not numbers)."""
    try:
        g = np.asarray(golden, dtype=np.float64)
        a = np.asarray(actual, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if g.shape != a.shape or not (np.isfinite(g).all() and np.isfinite(a).all()):
        return None
    return np.abs(a - g)
