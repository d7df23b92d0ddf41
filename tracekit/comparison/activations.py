"""A layer's output that departs first, fitted to the changes of an elementwise activation or of a
normalization that migrating teams make, and named only where the fit predicts the port's values
within the comparison's tolerance.

- An activation swapped for another (GELU's exact erf form for TF1 code's tanh approximation,
  Keras' LeakyReLU slope 0.3 for tf.nn.leaky_relu's 0.2, SiLU for GELU, ...): the golden's tap is
  inverted through its activation, giving the pre-activations (of a value two pre-activations
  give, GELU's and SiLU's below zero, each is tried), and the other activation of those predicts
  the port's tap. Every ordered pair of ACTIVATIONS is tried.
- A normalization over the last axis with another epsilon (Keras LayerNormalization's 1e-3 for
  TF1 code's 1e-12 or 1e-5): each row of the port's output is TF1's scaled about the layer's
  offset, port = golden + s_row (golden - b_column), by factors that differ between rows (a row of
  small variance moves most) and share one sign. The two unknowns are fitted by alternating least
  squares.

The golden keeps the layer's output only where the program taps it (tracekit record --tap).
Results are data (report/fingerprints.py renders them); numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import numpy as np

from .fingerprints import Fingerprint
from .fitting import ELEMENTS_PER_PARAMETER, EPS32, explains, f64
from .stats import compare_values
from .tolerance import Resolved

ACTIVATION = "activation"
NORM_EPSILON = "normalization-epsilon"

SAMPLE = 4096  # elements an activation's fit uses (a fixed stride over larger taps)
COVERED = 0.75  # the golden's values must have a pre-image on at least this share of the elements
SPREAD = 2.0  # an epsilon's per-row factors differ by at least this ratio between rows
_erf = np.vectorize(math.erf, otypes=[np.float64])
_ROOT_2_PI = math.sqrt(2.0 / math.pi)
_SELU = (1.0507009873554805, 1.6732632423543772)
_GELU_MIN, _SILU_MIN = -0.75179, -1.2784645  # where each turns from falling to rising


@dataclass(frozen=True)
class Activation:
    """f, and the intervals of pre-activations on which it is monotone (a value's pre-images are
    one per interval that reaches it)."""

    name: str
    f: Callable[[np.ndarray], np.ndarray]
    branches: Tuple[Tuple[float, float], ...] = ((-np.inf, np.inf),)


def _gelu_erf(z: np.ndarray) -> np.ndarray:
    return 0.5 * z * (1.0 + _erf(z / math.sqrt(2.0)))


def _gelu_tanh(z: np.ndarray) -> np.ndarray:
    return 0.5 * z * (1.0 + np.tanh(_ROOT_2_PI * (z + 0.044715 * z ** 3)))


def _leaky(slope: float) -> Activation:
    return Activation("leaky_relu(%g)" % slope, lambda z: np.where(z >= 0, z, slope * z))


ACTIVATIONS = (
    Activation("gelu_tanh", _gelu_tanh, ((-np.inf, _GELU_MIN), (_GELU_MIN, np.inf))),
    Activation("gelu_erf", _gelu_erf, ((-np.inf, _GELU_MIN), (_GELU_MIN, np.inf))),
    Activation("silu", lambda z: z / (1.0 + np.exp(-z)), ((-np.inf, _SILU_MIN), (_SILU_MIN, np.inf))),
    Activation("elu", lambda z: np.where(z > 0, z, np.expm1(np.minimum(z, 0.0)))),
    Activation("selu", lambda z: _SELU[0] * np.where(z > 0, z, _SELU[1] * np.expm1(np.minimum(z, 0.0)))),
    Activation("softplus", lambda z: np.logaddexp(0.0, z)),
    Activation("sigmoid", lambda z: 1.0 / (1.0 + np.exp(-z))),
    Activation("tanh", np.tanh),
    _leaky(0.01), _leaky(0.1), _leaky(0.2), _leaky(0.3),
)


def fingerprints(key: str, step: int, golden: object, port: object, tol: Resolved) -> List[Fingerprint]:
    """What changed a tap that departs first (its two values at `step`): an activation swapped,
    or a normalization's epsilon; [] where neither predicts the port's values within `tol`."""
    g, a = f64(golden), f64(port)
    if g.shape != a.shape or g.size < 8 or not (np.all(np.isfinite(g)) and np.all(np.isfinite(a))) or \
            compare_values(g, a, tol).ok:
        return []
    stride = max(1, g.size // SAMPLE)
    g, a = g[::stride], a[::stride]
    out = []
    for ours in ACTIVATIONS:
        with np.errstate(all="ignore"):
            preimages = _preimages(ours, g)
        out += [f for f in (_activation(key, step, g, a, tol, ours, theirs, preimages) for theirs in ACTIVATIONS
                            if theirs is not ours) if f is not None]
    shape = np.shape(golden)
    if not out and len(shape) >= 2:
        named = _normalization(key, step, np.asarray(golden, np.float64).reshape(-1, shape[-1]),
                               np.asarray(port, np.float64).reshape(-1, shape[-1]), tol)
        out += [named] if named is not None else []
    return sorted(out, key=lambda f: f.ulps)[:1]


def _preimages(activation: Activation, g: np.ndarray) -> List[np.ndarray]:
    """Per monotone interval of `activation`, the z it maps to each value of `g` (NaN where the
    interval does not reach it), by bisection in float64."""
    bound = 10.0 + 2.0 * float(np.max(np.abs(g)))
    out = []
    for low_z, high_z in activation.branches:
        low_z, high_z = max(low_z, -bound), min(high_z, bound)
        ends = activation.f(np.array([low_z, high_z], np.float64))
        rising = ends[1] > ends[0]
        inside = (g > min(ends)) & (g < max(ends))
        low, high = np.full(g.shape, low_z), np.full(g.shape, high_z)
        for _ in range(80):
            middle = (low + high) / 2
            below = activation.f(middle) < g
            right = below if rising else ~below
            low, high = np.where(right, middle, low), np.where(right, high, middle)
        out.append(np.where(inside, (low + high) / 2, np.nan))
    return out


def _activation(key: str, step: int, g: np.ndarray, a: np.ndarray, tol: Resolved, ours: Activation,
                theirs: Activation, preimages: List[np.ndarray]) -> Optional[Fingerprint]:
    """The port's values as `theirs` of the pre-activations whose `ours` the golden holds (of a
    value with two pre-images, the one nearer the port's)."""
    with np.errstate(all="ignore"):
        candidates = np.stack([theirs.f(z) for z in preimages])
    distance = np.where(np.isfinite(candidates), np.abs(candidates - a), np.inf)
    nearest = np.argmin(distance, axis=0)
    predicted = np.take_along_axis(candidates, nearest[None], axis=0)[0]
    z = np.take_along_axis(np.stack(preimages), nearest[None], axis=0)[0]
    used = np.isfinite(predicted) & (_sensitivity(ours, theirs, z) * EPS32 * np.abs(g) <= tol.atol + tol.rtol * np.abs(a))
    if used.sum() < max(8, COVERED * g.size):
        return None
    ulps = explains(predicted[used], a[used], float(np.max(np.abs(a[used] - g[used]))), tol)
    return None if ulps is None else Fingerprint(ACTIVATION, step, (key,), 0.0, 0.0, ulps,
                                                 {"golden": ours.name, "port": theirs.name,
                                                  "elements": float(used.sum())})


def _sensitivity(ours: Activation, theirs: Activation, z: np.ndarray) -> np.ndarray:
    """|theirs'(z) / ours'(z)|: how far the prediction moves per unit of the golden's value, which
    float32 rounded (a saturated tanh's or sigmoid's value leaves its pre-activation unknown)."""
    h = 1e-6 * (1.0 + np.abs(z))
    with np.errstate(all="ignore"):
        slope = np.abs((theirs.f(z + h) - theirs.f(z - h)) / (ours.f(z + h) - ours.f(z - h)))
    return np.where(np.isfinite(slope), slope, np.inf)


def _normalization(key: str, step: int, g: np.ndarray, a: np.ndarray, tol: Resolved) -> Optional[Fingerprint]:
    """port = golden + s_row (golden - b_column), the rows' s of one sign and spread: another
    epsilon in a normalization over the last axis (its offset b, the layer's beta)."""
    rows, columns = g.shape
    if rows < 2 or columns < 4 or g.size < ELEMENTS_PER_PARAMETER * (rows + columns) or compare_values(g, a, tol).ok:
        return None
    d = a - g
    offset = np.zeros(columns)
    scale = np.zeros(rows)
    for _ in range(30):  # alternating least squares: the rows' factors, then the columns' offsets
        centred = g - offset
        scale = np.sum(d * centred, axis=1) / np.maximum(np.sum(centred * centred, axis=1), 1e-300)
        weight = float(np.sum(scale * scale))
        if weight == 0:
            return None
        offset = np.sum(scale[:, None] * (scale[:, None] * g - d), axis=0) / weight
    predicted = g + scale[:, None] * (g - offset)
    magnitude = np.abs(scale)
    if not (np.all(scale > 0) or np.all(scale < 0)) or magnitude.max() < SPREAD * magnitude.min():
        return None
    ulps = explains(predicted, a, float(np.max(np.abs(d))), tol)
    if ulps is None:
        return None
    # s < 0: the port divides by a larger sqrt(variance + epsilon)
    return Fingerprint(NORM_EPSILON, step, (key,), 0.0, 0.0, ulps,
                       {"larger": "port" if scale[0] < 0 else "golden", "least": float(1 + scale[np.argmin(magnitude)]),
                        "most": float(1 + scale[np.argmax(magnitude)])})
