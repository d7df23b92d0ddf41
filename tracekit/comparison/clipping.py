"""Gradient clipping one side does and the other does not (or at another threshold), as the
fingerprints (fingerprints.py) name it:

- by value: the port's gradient is clip(golden's, -c, c), c the port's largest |element|; or
  the golden's is the port's clipped, c the golden's largest. At least CLIPPED_AT_LEAST
  elements must sit at the threshold, or one element "explains" itself. The side that does
  not clip has the threshold inf.
- by global norm (tf.clip_by_global_norm): every gradient of the step scaled by one factor,
  clip_norm / global_norm. Named where the port's global norm (the factor times the golden's)
  is a round number below the golden's, or the golden's is a round number and the port's
  larger. A round number has one or two significant digits (0.5, 1, 5, 2.5, 10), to
  fitting.RTOL. Where the factor is itself a loss scale's (a power of two, or a whole number
  up to WHOLE_SCALES, or its inverse) the scale stays the name: a clip gives such a factor
  only by chance.
- by each gradient's own norm (tf.clip_by_norm, Keras' clipnorm): each failing gradient scaled by
  a factor of its own, c / its norm, the same round c on the clipping side for all of them. At
  least two gradients with factors that differ are needed: one factor shared is the global
  clip's (or a scale's).

numpy only; Python 3.7 syntax.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..keys import make_key
from .explained import Explained
from .fitting import ELEMENTS_PER_PARAMETER, EPS32, explains, f64, same
from .tolerance import Resolved

CLIP_VALUE = "clip-by-value"
CLIP_NORM = "clip-by-global-norm"
CLIP_EACH_NORM = "clip-by-norm"
NONE = float("inf")  # the threshold of the side that does not clip
CLIPPED_AT_LEAST = 2  # elements at the threshold a clip by value needs
AT_THRESHOLD = 4 * EPS32  # an element this close (relative) to the largest is at the threshold: float32(c)
WHOLE_SCALES = 64  # a factor that is a whole number up to this (or its inverse) is a loss scale's


def round_value(x: float) -> Optional[float]:
    """x as a number of one or two significant digits, where it is one to fitting.RTOL."""
    if not (x > 0 and math.isfinite(x)):
        return None
    for digits in (1, 2):
        candidate = float("%.*e" % (digits - 1, x))
        if same(x, candidate):
            return candidate
    return None


def by_value(key: str, g_value: Any, a_value: Any, tol: Resolved) -> Optional[Explained]:
    """The port's gradient as the golden's clipped by value, or the golden's as the port's."""
    g, a = f64(g_value), f64(a_value)
    if g.size < ELEMENTS_PER_PARAMETER or not (np.all(np.isfinite(g)) and np.all(np.isfinite(a))):
        return None
    before = float(np.max(np.abs(a - g)))
    g_at, a_at = _at_threshold(g), _at_threshold(a)
    if a_at is not None:
        c = float(np.abs(a[a_at]).max())
        snapped = round_value(c)
        for threshold in ([snapped] if snapped is not None else []) + [c]:
            ulps = explains(np.clip(g, -threshold, threshold), a_value, before, tol)
            if ulps is not None:  # a golden that clips at a larger threshold has its own
                return Explained(key, CLIP_VALUE, _threshold(g, g_at), threshold, ulps)
    if g_at is not None:
        # the golden's elements at +-c are what the port's were past c, on the same side of zero;
        # the rest must be the port's to the tolerance
        c = float(np.abs(g[g_at]).max())
        beyond = g_at & (np.sign(a) == np.sign(g)) & (np.abs(a) >= c * (1 - AT_THRESHOLD))
        ulps = explains(np.where(beyond, a, g), a_value, before, tol)
        if ulps is not None and np.any(beyond):
            return Explained(key, CLIP_VALUE, _threshold(g, g_at), _threshold(a, a_at), ulps)
    return None


def _at_threshold(x: np.ndarray) -> Optional[np.ndarray]:
    """The elements at the largest |element|, where CLIPPED_AT_LEAST are: what a clip leaves."""
    c = float(np.max(np.abs(x)))
    at = np.abs(x) >= c * (1 - AT_THRESHOLD)
    return at if c > 0 and int(np.count_nonzero(at)) >= CLIPPED_AT_LEAST else None


def _threshold(x: np.ndarray, at: Optional[np.ndarray]) -> float:
    """A side's clip threshold, rounded where it is round; inf where it shows none."""
    if at is None:
        return NONE
    c = float(np.abs(x[at]).max())
    return round_value(c) or c


def global_norm(recorded: Mapping[str, Any], names: Sequence[str]) -> Optional[float]:
    """The golden's global norm of the step's gradients (a sparse one's rows, its indices left
    out), or None where one of `names` is not all there (a digest, a step without gradients)."""
    total = 0.0
    for name in names:
        key = make_key("grad", name)
        if key not in recorded:
            return None
        value = recorded[key]
        if not isinstance(value, np.ndarray):
            return None
        if value.dtype.kind in "iu":  # a sparse gradient's indices
            continue
        if value.dtype.kind != "f":
            return None
        total += float(np.sum(np.square(value.astype(np.float64))))
    return math.sqrt(total) if total > 0 and math.isfinite(total) else None


def scale_like(factor: float) -> bool:
    """Whether a factor is a loss scale's: a power of two, a whole number up to WHOLE_SCALES, or
    the inverse of one."""
    if not (factor > 0 and math.isfinite(factor)):
        return False
    for x in (factor, 1 / factor):
        if same(x, 2.0 ** round(math.log2(x))) or (x <= WHOLE_SCALES + 0.5 and round(x) >= 1 and same(x, round(x))):
            return True
    return False


def as_clip(hint: Any, golden_norm: float) -> Any:
    """A gradient-scale fingerprint (fingerprints.Fingerprint) as a clip by global norm where
    one side's global norm is round (by_global_norm); a loss scale's factor stays a scale, the
    round norm noted in its detail."""
    clipped = by_global_norm(hint.port, golden_norm)
    if clipped is None:
        return hint
    if scale_like(hint.port):
        return replace(hint, detail={**hint.detail, **clipped[2], "clip_norm": min(clipped[0], clipped[1])})
    return replace(hint, code=CLIP_NORM, golden=clipped[0], port=clipped[1], detail=clipped[2])


def by_global_norm(factor: float, golden_norm: float) -> Optional[Tuple[float, float, Dict[str, float]]]:
    """(golden's clip_norm, port's, detail) where a factor every gradient shares is a clip by
    global norm on one side: the port's norm round and under the golden's, or the golden's round
    and under the port's. The side that does not clip has clip_norm inf."""
    port_norm = factor * golden_norm
    detail = {"factor": factor, "golden_norm": golden_norm, "port_norm": port_norm}
    if 0 < factor < 1:
        threshold = round_value(port_norm)
        return None if threshold is None else (NONE, threshold, detail)
    if factor > 1:
        threshold = round_value(golden_norm)
        return None if threshold is None else (threshold, NONE, detail)
    return None


def by_each_norm(scales: Mapping[str, float], recorded: Mapping[str, Any]
                 ) -> Optional[Tuple[float, float, Dict[str, float]]]:
    """(golden's clip_norm, port's, detail) where the gradients `scales` names ("grad/<name>" ->
    the factor the port's is of the golden's) are each clipped to one norm on one side: the
    port's norms (factor x the golden's) all one round c under the golden's, or the golden's norms
    all one round c under the port's."""
    if len(scales) < 2 or all(same(f, next(iter(scales.values()))) for f in scales.values()):
        return None
    norms = {}
    for key in scales:
        value = recorded[key] if key in recorded else None
        if not isinstance(value, np.ndarray) or value.dtype.kind != "f":
            return None
        norms[key] = float(np.linalg.norm(value.astype(np.float64)))
    for clipping_side in ("port", "golden"):
        clipped = {k: (scales[k] * n if clipping_side == "port" else n) for k, n in norms.items()}
        other = {k: (n if clipping_side == "port" else scales[k] * n) for k, n in norms.items()}
        values = list(clipped.values())
        c = round_value(values[0])
        if c is not None and all(same(v, c) and v < other[k] for (k, v) in clipped.items()):
            detail = {"gradients": float(len(scales))}
            return (NONE, c, detail) if clipping_side == "port" else (c, NONE, detail)
    return None
