"""Judging a tensor from digests (store/digest.py) where a golden keeps no values.

The tolerance is elementwise: |a_i - g_i| <= t_i = atol + rtol * |g_i| + ulps * eps * S, with S
the golden's largest |g| (which its digest holds). A digest verdict fails when
- the sampled elements fail that rule (the same rule, with the same S, as a full comparison), or
- a statistic differs by more than elements all within tolerance allow (T = atol + ulps * eps * S):
    |sum a - sum g|, |sum|a| - sum|g||  <=  n * T + rtol * sum|g|        (sum of the t_i)
    | ||a|| - ||g|| |                   <=  sqrt(n) * T + rtol * ||g||   (triangle inequality on ||a - g||)
    |min a - min g|, |max a - max g|, |max|a| - max|g||  <=  T + rtol * S
  (each plus the round-off of the sums themselves: float64's, or what a digest made in the graph
  states; such a digest has no sum of |x|, and sqrt(n) * ||g|| stands in for sum|g|), or
- the NaN or Inf counts differ, or NaNs are there without equal_nan, or
- where the tolerance sets `moments` (the drift envelope does, from what its perturbed replays
  measured), the sum, sum of |x| or norm differs by more than moments * eps * its own scale (sum
  of |x| for the sums, the norm for the norm) when that is the tighter bound: a whole tensor or
  layer scaled or shifted moves these far beyond what round-off moves them, while the sampled
  elements, each within an envelope that Adam's noise-floor flips widen, need not show it.

A tensor that passes a full comparison therefore passes its digest: every bound but `moments`
is implied by every element passing, so a digest adds no false alarm of its own. It cannot
pass what its sample fails, since the sample is judged by the full rule. What it can miss is a departure of a
few unsampled elements too small to move a statistic past its bound; docs/NUMERICS.md
says how small. Equal crc32s with no NaN (or equal_nan) pass at once: the bytes are the same.
Integers and booleans compare exactly: their crc32s decide, the sample shows where.
"""

from __future__ import annotations

import math
from typing import Any, List, Optional, Tuple

import numpy as np

from ..store.digest import Digest, digest
from .stats import Stats, compare_values, float64_stats
from .tolerance import Resolved

# Relative float64 round-off allowed on a statistic summed over a tensor (pairwise sums of up
# to 2**40 float32 terms are far inside it).
SUM_SLACK = 1e-9

BITS = "bits"  # identical bytes (crc32)
DIGEST = "digest"  # sample and statistics
WHOLE = "whole"  # a digest holding every element: compared in full
MOMENTS = ("sum", "sum of |x|", "norm")  # the statistics a `moments` setting bounds as a whole


def as_digest(value: Any, other: Optional[Digest] = None) -> Optional[Digest]:
    """A digest of `value` if it is not one (None if no digest can be made of it). Its crc32 is
    computed only where it could equal `other`'s: the sampled elements' bytes agree."""
    if isinstance(value, Digest):
        return value
    array = np.asarray(value) if isinstance(value, (np.ndarray, np.generic, int, float, bool)) else None
    if array is None or array.dtype.kind not in "biufV":
        return None
    if other is not None and (array.dtype.name != other.dtype or array.size != other.count):
        return digest(array, crc=False)
    return digest(array, crc_if=None if other is None else other.sample)


def compare_digests(g: Digest, a: Digest, tol: Resolved) -> Stats:
    """Stats of a tensor known by the two digests; `stats.basis` says what decided. From a sample,
    `mismatched` counts the sampled elements that fail (a statistic can fail with none)."""
    if g.shape != a.shape:
        stats = Stats()
        stats.ok, stats.total, stats.mismatched, stats.basis = False, max(g.count, 1), max(g.count, 1), DIGEST
        stats.problem = "shape %s, golden %s" % (a.shape, g.shape)
        stats.ulps = float("inf")  # no finite error: what a spread of runs reads (calibration.Spread)
        return stats
    if g.whole and a.whole:  # every element is there
        stats = compare_values(g.value(), a.value(), tol)
        stats.basis = WHOLE
        return stats
    if g.crc is not None and g.crc == a.crc and g.dtype == a.dtype and (not g.nan or tol.equal_nan):
        stats = Stats()
        stats.total, stats.basis = g.count, BITS
        stats.atol, stats.rtol, stats.allowed_ulps = tol.atol, tol.rtol, tol.ulps
        stats.golden_scale = 0.0 if math.isnan(g.maxabs) else g.maxabs
        stats.discrete = g.sample.dtype.kind in "biu"
        return stats
    scale = 0.0 if math.isnan(g.maxabs) else g.maxabs
    roundoff = tol.ulps * tol.eps * scale
    # The sample under the full rule, its scale the whole tensor's: the roundoff term as atol.
    sampled = Resolved(tol.atol + roundoff, tol.rtol, tol.equal_nan, tol.ignore, tol.exact, 0.0, tol.eps)
    if tol.exact or g.sample.dtype.kind in "biu":
        stats = compare_values(g.sample, a.sample, sampled)
        if stats.ok and g.crc is not None and a.crc is not None:  # the bytes differ somewhere unsampled
            stats.ok = False
            stats.problem = "the bytes differ (crc32) where no sampled element does"
        elif stats.ok:  # equal values in other bytes (0.0 and -0.0): the statistics must agree
            _bounds(stats, g, a, tol, roundoff)
    else:
        stats = float64_stats(Stats(), g.sample, a.sample, sampled)
        stats.needed_atol = max(0.0, stats.needed_atol - roundoff)
        stats.golden_scale = scale
        unit = tol.eps * scale
        stats.ulps = stats.max_abs / unit if unit > 0 else (0.0 if stats.max_abs == 0 else float("inf"))
        _bounds(stats, g, a, tol, roundoff)
    stats.atol, stats.rtol, stats.allowed_ulps = tol.atol, tol.rtol, tol.ulps
    stats.total, stats.basis = g.count, DIGEST
    if stats.worst_index is not None and stats.worst_index:  # a sample index: the tensor's
        stats.worst_index = g.index_of(stats.worst_index[0])
    return stats


def _bounds(stats: Stats, g: Digest, a: Digest, tol: Resolved, roundoff: float) -> None:
    """Fail `stats` where a statistic is beyond what elements within tolerance allow; what each
    statistic's difference shows of the error goes into max_abs and needed_atol (lower bounds)."""
    problems: List[str] = []
    if (g.nan, g.inf) != (a.nan, a.inf):
        problems.append("%d NaN and %d Inf, golden %d and %d" % (a.nan, a.inf, g.nan, g.inf))
        stats.nonfinite = max(stats.nonfinite, abs(a.nonfinite - g.nonfinite), 1)
    elif g.nan and not tol.equal_nan:
        problems.append("%d NaN on both sides (equal_nan is off)" % g.nan)
        stats.nonfinite = max(stats.nonfinite, g.nan)
    n, per = g.count - g.nonfinite, tol.atol + roundoff
    scale = stats.golden_scale
    # name, |difference|, bound, n-weight, rtol-term, its own scale (the moments' unit) or 0
    checks: List[Tuple[str, float, float, float, float, float]] = []
    if n and not math.isnan(g.min) and not math.isnan(a.min):
        # A digest made in the graph has no sum of |x| (its bound from the norm stands in) and
        # states its sums' round-off, added to each bound.
        l1 = g.l1
        slack = SUM_SLACK * (l1 + a.l1) + g.roundoff * l1 + a.roundoff * a.l1
        checks.append(("sum", abs(a.sum - g.sum), n * per + tol.rtol * l1 + slack, n, tol.rtol * l1, l1))
        if not (math.isnan(g.sumabs) or math.isnan(a.sumabs)):
            checks.append(("sum of |x|", abs(a.sumabs - g.sumabs), n * per + tol.rtol * l1 + slack, n,
                           tol.rtol * l1, l1))
        checks.append(("norm", abs(a.norm - g.norm), math.sqrt(n) * per + tol.rtol * g.norm + (SUM_SLACK + g.roundoff)
                       * g.norm + (SUM_SLACK + a.roundoff) * a.norm, math.sqrt(n), tol.rtol * g.norm, g.norm))
        for name, x, y in (("min", a.min, g.min), ("max", a.max, g.max), ("max |x|", a.maxabs, g.maxabs)):
            checks.append((name, abs(x - y), per + tol.rtol * scale, 1.0, tol.rtol * scale, 0.0))
    for name, diff, bound, weight, relative, own in checks:
        # An error of at least diff / weight somewhere (n elements make the sum's difference).
        stats.max_abs = max(stats.max_abs, diff / weight)
        if name in MOMENTS and own > 0:
            moved = diff / (tol.eps * own)
            stats.moments = max(stats.moments, moved)
            whole = (tol.moments * tol.eps + SUM_SLACK + g.roundoff + a.roundoff) * own
            if whole < bound:  # the envelope's bound on the tensor as a whole is the tighter
                if diff > whole:
                    problems.append("%s differs by %.6g (%.4g eps of its scale), beyond the %.4g eps the drift "
                                    "envelope allows" % (name, diff, moved, tol.moments))
                continue
        if diff > bound:
            problems.append("%s differs by %.6g, beyond the %.6g elements within tolerance allow" % (name, diff, bound))
            stats.needed_atol = max(stats.needed_atol, (diff - relative) / weight - roundoff)
    unit = tol.eps * scale
    stats.ulps = stats.max_abs / unit if unit > 0 else (0.0 if stats.max_abs == 0 else float("inf"))
    if problems:
        stats.ok = False
        stats.problem = "; ".join(problems) if stats.problem is None else stats.problem
