"""Two corrections one framework makes where another does not, each named only where it
predicts the port's value to the tolerance (fitting.explains):

- Adam's epsilon after the bias correction (PyTorch's and optax's Adam: sqrt(v_hat) + eps)
  against before it (TF1's AdamOptimizer and Keras': lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t),
  m / (sqrt(v) + eps)). In TF's terms the port's epsilon is eps sqrt(1 - beta2^t): a fit of
  epsilon alone finds a value no team passes, and one that changes with the step.
- A running variance with Bessel's correction, n / (n - 1) on the batch's variance (PyTorch's
  BatchNorm, TF's fused batch norm on 4-D inputs) against without (Keras' batch norm on 2-D
  inputs, tf.nn.moments): the port's move of a moving variance, S + m (c v - S) against the
  golden's S + m (v - S), is c (G - S) + (c - 1) m S: c and m by least squares, c then
  snapped to n / (n - 1) (or its inverse) for a whole n.
numpy only; Python 3.7 syntax.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from .explained import Explained, largest
from .fitting import explains, f64, lstsq
from .tolerance import Resolved

EPSILON_HAT = "epsilon-after-bias-correction"
BESSEL = "running-variance-bessel"
BESSEL_N_MAX = 1 << 24  # the largest count of values a batch's variance is taken over that is told from 1
BESSEL_N_EXACT = 1000  # up to this count n is told exactly; above, n / (n - 1) is within round-off of its neighbours
# The smallest rate of a moving average (torch's momentum; 1 - TF's) read as one: a fit of a plain
# factor (another momentum) leaves a rate of about zero.
RATE_MIN = 1e-4


@dataclass(frozen=True)
class Hat:
    """The port's epsilon (`eps`, its own setting), added after the bias correction at step count
    `t`, and the ulps its prediction leaves."""

    eps: float
    t: int
    ulps: float
    beta_2: float = 0.999

    @property
    def acting(self) -> float:
        """The epsilon it acts as in TF's form at step count t: eps sqrt(1 - beta_2^t)."""
        return self.eps * float(np.sqrt(1 - self.beta_2 ** self.t))


def epsilon_hat(golden_fit: Mapping[str, float], predict: Callable[[Mapping[str, float]], np.ndarray], actual: Any,
                tol: Resolved, beta_2: float, counts: Sequence[int], epsilons: Sequence[float]) -> Optional[Hat]:
    """The port's update as the golden's Adam with epsilon after the bias correction: the
    golden's alpha and decay, the epsilon eps sqrt(1 - beta_2^t) for a step count t the step may
    have had and eps the golden's or a usual one; None where none predicts to the tolerance."""
    if not 0 < beta_2 < 1:
        return None
    before = largest(predict(golden_fit), actual)
    tried = [golden_fit["eps"]] + [e for e in epsilons if e != golden_fit["eps"]]
    for t in counts:
        shrink = float(np.sqrt(1 - beta_2 ** t))
        for eps in tried:
            ulps = explains(predict(dict(golden_fit, eps=eps * shrink)), actual, before, tol)
            if ulps is not None:
                return Hat(eps, t, ulps, beta_2)
    return None


def bessel(key: str, start: Any, g_value: Any, a_value: Any, tol: Resolved) -> Optional[Explained]:
    """A moving variance moved with Bessel's correction on one side only: Explained with the
    factor on the golden's side and the port's (1 and n / (n - 1), or the reverse), detail n and
    the average's rate m; None where it does not predict the port's value to the tolerance."""
    s, g, wanted = f64(start), f64(g_value), f64(a_value)
    if not (s.shape == g.shape == wanted.shape) or s.size < 2 or np.any(s < 0):
        return None
    solution = lstsq([g - s, s], wanted - s)
    if solution is None or not np.isfinite(solution).all():
        return None
    c, k = float(solution[0]), float(solution[1])
    if abs(c - 1) < 1e-9:
        return None
    n = 1 / (c - 1) + 1 if c > 1 else 1 / (1 - c)  # c = n / (n - 1), or (n - 1) / n
    whole = int(round(n))
    if not 2 <= whole <= BESSEL_N_MAX:
        return None
    c = whole / (whole - 1.0) if c > 1 else (whole - 1.0) / whole
    m = k / (c - 1)
    if not RATE_MIN <= m < 1:
        return None
    before = largest(g, wanted)
    ulps = explains(s + c * (g - s) + (c - 1) * m * s, a_value, before, tol)
    if ulps is None:
        return None
    golden_side, port_side = (1.0, c) if c > 1 else (1 / c, 1.0)
    return Explained(key, BESSEL, golden_side, port_side, ulps, {"n": float(whole), "rate": m})
