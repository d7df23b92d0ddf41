"""The statistics of a float32 (or narrower) tensor in one blockwise float32 pass, equal to
the float64 ones stats.py defines, bit for bit.

Computing every statistic in float64 over the whole tensor (stats.float64_stats) costs a
dozen passes through float64 temporaries. Here each block of BLOCK elements is computed
in float32, cache-resident, and yields for every statistic an upper bound on the block's
float64 value (float32 round-off is a few parts in 2**24 of the values involved; the
bounds allow 2**-20 and more). The elements whose verdict (error / threshold against 1) is
too close to call in float32 are decided in float64 on the spot. Then, for each maximum, the
blocks are visited by decreasing bound until none can beat the best value found (branch
and bound), and in each only the few elements near its float32 maximum are evaluated in
float64 with the very formulas of float64_stats: the results are the float64 ones.
Tensors with NaN or Inf, or whose differences overflow float32, are left to
float64_stats (None)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import numpy as np

# Elements per block: its float32 temporaries (2 MB) stay in a CPU's L2 cache or near it, and a
# block takes ~25 numpy calls, few enough that two threads comparing at once seldom wait on the
# GIL (1 << 16 compared the big MLP pair at 386 MB/s a side on 2 cores, 1 << 17 at 431, 1 << 18 at 393).
BLOCK = 1 << 17
UNSURE = 2.0 ** -18  # relative: far above the float32 round-off of a threshold and an error
TINY = 2.0 ** -126  # absolute: float32 underflow (subnormal results)
NORMAL = 2.0 ** -100  # a threshold this big is exact to float32 round-off; smaller: float64 decides
BOUND = 2.0 ** -20  # relative slack of an upper bound on a float32-computed maximum
CANCEL = 2.0 ** -12  # |error - threshold| below this (relative): float32 cannot tell needed_rtol
LIMIT = 1e30  # tolerances beyond float32's comfortable range go to float64


@dataclass
class Summary:
    """What stats.Stats needs of a finite float tensor."""

    mismatched: int
    max_abs: float
    max_rel: float
    needed_atol: float
    needed_rtol: float
    worst: Optional[int]  # flat index
    golden_scale: float
    unit: float


def float_stats(g: np.ndarray, a: np.ndarray, atol: float, rtol: float, ulps: float, eps: float) -> Optional[Summary]:
    """The statistics of two same-shape float arrays of at most 32 bits, or None when they hold
    NaN or Inf (or overflow float32): float64_stats handles those."""
    if not (0 <= atol < LIMIT and 0 <= rtol < LIMIT and 0 <= ulps * eps < LIMIT):
        return None
    g = _float32(g.reshape(-1))
    a = _float32(a.reshape(-1))
    if g.size == 0:
        return None
    roundoff = 0.0
    if ulps:  # the round-off term scales with the largest |golden|: needed before the pass
        top, bottom = float(g.max()), float(g.min())  # NaN propagates: caught just below
        roundoff = ulps * eps * max(top, -bottom)
        if not np.isfinite(roundoff):
            return None
    scan = _Scan(g, a, atol, rtol, roundoff)
    if not scan.run():
        return None
    return scan.summary(scan.golden_scale, eps * scan.golden_scale)


def _float32(x: np.ndarray) -> np.ndarray:
    return x if x.dtype == np.float32 else x.astype(np.float32)  # float16 and bfloat16 exactly


class _Scan:
    """One float32 pass over the blocks, then the float64 refinement."""

    def __init__(self, g: np.ndarray, a: np.ndarray, atol: float, rtol: float, roundoff: float) -> None:
        self.g, self.a = g, a
        self.atol, self.rtol, self.roundoff = atol, rtol, roundoff
        self.rtol32 = np.float32(rtol)
        self.c32 = np.float32(atol + roundoff)
        # Below this an error passes whatever the golden (the threshold is at least atol + roundoff).
        self.sure_good = float(self.c32) * (1 - UNSURE) - TINY
        self.cancel_band = np.float32(3 * CANCEL * float(self.c32))
        self.tiny_threshold = float(self.c32) < NORMAL  # else error / threshold is exact to float32 round-off
        self.below_roundoff = roundoff * (1 - UNSURE) - TINY
        self.golden_scale = 0.0  # the largest |golden|, found as the blocks pass
        self.q_slack: List[float] = []  # per block: rtol * its largest |golden|
        self.starts = list(range(0, g.size, BLOCK))
        self.mismatched = 0
        self.need_inf = False
        # Per block, upper bounds of its float64 statistics (None: the block cannot matter).
        self.ub_abs: List[float] = []
        self.ub_rel: List[float] = []
        self.ub_over: List[Optional[float]] = []
        self.ub_need: List[Optional[float]] = []
        self.ub_worst: List[Optional[float]] = []
        n = min(BLOCK, g.size)
        self._e, self._s, self._t, self._u = (np.empty(n, np.float32) for _ in range(4))
        self._last: Optional[Tuple[int, Tuple[np.ndarray, ...]]] = None  # _float32's last block
        self._m1, self._m2, self._m3 = np.empty(n, bool), np.empty(n, bool), np.empty(n, bool)

    def block(self, b: int) -> Tuple[np.ndarray, np.ndarray]:
        start = self.starts[b]
        return self.g[start:start + BLOCK], self.a[start:start + BLOCK]

    def run(self) -> bool:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            for b in range(len(self.starts)):
                if not self._block(b):
                    return False
        return True

    def _block(self, b: int) -> bool:
        g, a = self.block(b)
        n = g.size
        e, s, t, u = self._e[:n], self._s[:n], self._t[:n], self._u[:n]
        np.subtract(a, g, out=e)
        np.abs(e, out=e)
        emax = float(e.max())
        if not np.isfinite(emax):
            return False  # NaN or Inf on a side, or a difference beyond float32
        self.ub_abs.append(emax * (1 + BOUND))
        np.abs(g, out=s)
        smax = float(s.max())
        self.golden_scale = max(self.golden_scale, smax)
        q_slack = self.rtol * smax
        self.q_slack.append(q_slack)
        if not np.isfinite(np.float32(q_slack + self.atol + self.roundoff)):
            return False  # a threshold beyond float32
        # max_rel: err / scale where the golden is not zero (0 / 0 is NaN, which fmax skips)
        np.divide(e, s, out=t)
        rmax = float(np.fmax.reduce(t))
        if rmax == np.inf:  # a golden zero with an error (or a quotient beyond float32): zeros left out
            np.copyto(t, 0, where=np.equal(s, 0, out=self._m1[:n]))
            rmax = float(t.max())
        self.ub_rel.append(-np.inf if np.isnan(rmax) else rmax * (1 + BOUND) + TINY)
        over = emax > self.below_roundoff  # else err - rtol * scale cannot exceed the roundoff term
        verdicts = emax >= self.sure_good  # else every element passes, and over <= 0 everywhere
        if over or verdicts:
            np.multiply(s, self.rtol32, out=u)  # the threshold's first term, kept for the verdicts
        # needed_atol: the largest err - rtol * scale
        if over:
            np.subtract(e, u, out=t)
            self.ub_over.append(float(t.max()) + BOUND * (emax + q_slack) + TINY - self.roundoff)
        else:
            self.ub_over.append(None)
        if not verdicts:
            self.ub_need.append(None)
            self.ub_worst.append(None)
            return True
        self._verdicts(b, e, s, t, u)
        return True

    def _verdicts(self, b: int, e: np.ndarray, s: np.ndarray, t: np.ndarray, u: np.ndarray) -> None:
        """Mismatches, the worst one and needed_rtol of a block with errors near or over atol
        (`u` holds rtol * |golden|). The few elements float32 cannot decide are decided in
        float64, one by one."""
        n = e.size
        bad, maybe = self._m1[:n], self._m2[:n]
        u += self.c32  # the threshold, in float32: within a few float32 round-offs of float64's
        np.divide(e, u, out=t)  # error / threshold: over 1 is a mismatch
        np.greater(t, 1 + UNSURE, out=bad)  # surely over the threshold
        np.greater_equal(t, 1 - UNSURE, out=maybe)  # not surely under it (NaN, 0 / 0: under)
        np.not_equal(bad, maybe, out=maybe)
        if self.tiny_threshold:  # a threshold float32 holds with less precision, or zero: float64 decides
            maybe |= np.less(u, NORMAL, out=self._m3[:n])
        close = np.flatnonzero(maybe)
        g, a = self.block(b)
        if close.size:
            err, scale = _exact_err(g[close], a[close])
            bad[close] = err > self.atol + self.rtol * scale + self.roundoff
        count = int(np.count_nonzero(bad))
        self.mismatched += count
        self.ub_worst.append(float(np.multiply(e, bad, out=u).max()) * (1 + BOUND) if count else None)
        if self.need_inf:  # needed_rtol is known to be inf already
            self.ub_need.append(None)
            return
        # needed_rtol: over / scale with over = err - atol - roundoff, where over > 0. Where over is
        # within CANCEL of zero (|err - c| <= CANCEL * (err + c)), float32 cannot bound it: those
        # elements, and a few more (|err - c| <= 3 * CANCEL * c holds them all), are computed in float64.
        np.subtract(e, self.c32, out=t)
        np.abs(t, out=u)
        np.less_equal(u, self.cancel_band, out=maybe)
        close = np.flatnonzero(maybe)
        exact_need = 0.0
        if close.size:
            err, scale = _exact_err(g[close], a[close])
            over = err - self.atol - self.roundoff
            with np.errstate(divide="ignore", invalid="ignore"):
                exact_need = float(np.where(over <= 0, 0.0, over / scale).max())
            t[close] = 0
        np.divide(t, s, out=u)  # inf at a golden zero with over > 0, as in float64
        need = float(np.fmax.reduce(u))
        if need == np.inf and np.count_nonzero(np.less_equal(s, 0, out=maybe) & (t > 0)):
            self.need_inf = True  # over surely > 0 at a golden zero: float64 says inf too
            self.ub_need.append(None)
            return
        bound = 0.0 if np.isnan(need) or need <= 0 else need * (1 + 2 ** -8) + TINY
        self.ub_need.append(max(bound, exact_need) if bound or exact_need else None)

    def summary(self, golden_scale: float, unit: float) -> Summary:
        max_abs = _refine(self.ub_abs, self._exact_abs, 0.0)
        max_rel = _refine(self.ub_rel, self._exact_rel, 0.0)
        over = _refine(self.ub_over, self._exact_over, 0.0)
        need = np.inf if self.need_inf else _refine(self.ub_need, self._exact_need, 0.0)
        return Summary(self.mismatched, max_abs, max_rel, max(0.0, over), need,
                       self._worst() if self.mismatched else None, golden_scale, unit)

    # ---- float64 on the few elements of a block that can hold its maximum -------------------
    # An element's float32 value is within a block's slack of its float64 one, so the maximum
    # is among the elements within twice the slack of the block's float32 maximum.

    def _float32(self, b: int) -> Tuple[np.ndarray, ...]:
        """The block's golden, actual, |a - g| and |g| (float32; kept for the next statistic, which
        often refines the same block)."""
        if self._last is None or self._last[0] != b:
            g, a = self.block(b)
            self._last = (b, (g, a, np.abs(a - g), np.abs(g)))
        return self._last[1]

    def _exact_abs(self, b: int) -> float:
        g, a, e, _ = self._float32(b)
        top = float(e.max())
        pick = np.flatnonzero(e >= top * (1 - 2 * BOUND))
        return float(_exact_err(g[pick], a[pick])[0].max())

    def _exact_rel(self, b: int) -> float:
        g, a, e, s = self._float32(b)
        r = np.zeros_like(e)
        np.divide(e, s, out=r, where=s > 0)
        top = float(r.max())
        pick = np.flatnonzero((r >= top * (1 - 2 * BOUND) - 2 * TINY) & (s > 0))
        if not pick.size:
            return -np.inf
        err, scale = _exact_err(g[pick], a[pick])
        return float((err / scale).max())

    def _exact_over(self, b: int) -> float:
        g, a, e, s = self._float32(b)
        q = e - s * self.rtol32
        top = float(q.max())
        pick = np.flatnonzero(q >= top - 2 * (BOUND * (float(e.max()) + self.q_slack[b]) + TINY))
        err, scale = _exact_err(g[pick], a[pick])
        return float((err - self.rtol * scale - self.roundoff).max())

    def _exact_need(self, b: int) -> float:
        g, a, e, s = self._float32(b)
        over = e - self.c32
        with np.errstate(divide="ignore", invalid="ignore"):
            need = over / s
        need[np.abs(over) <= (e + self.c32) * np.float32(CANCEL)] = np.inf  # float32 cannot tell: take them
        top = float(np.fmax.reduce(need[np.isfinite(need)])) if np.isfinite(need).any() else 0.0
        pick = np.flatnonzero(~(need < top * (1 - 2 ** -7) - 2 * TINY))  # NaN (0 / 0) and inf included
        err, scale = _exact_err(g[pick], a[pick])
        over64 = err - self.atol - self.roundoff
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(np.where(over64 <= 0, 0.0, over64 / scale).max()) if pick.size else 0.0

    def _exact_worst(self, b: int) -> Optional[Tuple[float, int]]:
        """(err, index in the block) of the block's first largest mismatch."""
        g, a, e, _ = self._float32(b)
        bad_pick = np.flatnonzero(e >= float(self.ub_worst[b] or 0.0) * (1 - 3 * BOUND))
        err, scale = _exact_err(g[bad_pick], a[bad_pick])
        bad = err > self.atol + self.rtol * scale + self.roundoff
        if not bad.any():
            return None
        err = np.where(bad, err, -1.0)
        i = int(np.argmax(err))
        return float(err[i]), int(bad_pick[i])

    def _worst(self) -> int:
        """The first index of the largest error among the mismatches (float64_stats' argmax)."""
        best: Optional[Tuple[float, int]] = None
        for b in sorted((b for b, ub in enumerate(self.ub_worst) if ub is not None), key=lambda b: -self.ub_worst[b]):
            ub = self.ub_worst[b]
            if best is not None and ub < best[0]:
                break
            found = self._exact_worst(b)
            if found is None:
                continue
            candidate = (found[0], self.starts[b] + found[1])
            if best is None or candidate[0] > best[0] or (candidate[0] == best[0] and candidate[1] < best[1]):
                best = candidate
        assert best is not None  # a block with mismatches has a worst one
        return best[1]


def _exact_err(g: np.ndarray, a: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """float64_stats' |a - g| and |g|."""
    g64 = g.astype(np.float64)
    return np.abs(a.astype(np.float64) - g64), np.abs(g64)


def _refine(bounds: List[Optional[float]], exact: Callable[[int], float], floor: float) -> float:
    """max(floor, the largest exact value over the blocks), evaluating blocks in order of their
    upper bounds until no remaining bound can beat the best value found."""
    best = floor
    for b in sorted((b for b, ub in enumerate(bounds) if ub is not None), key=lambda b: -bounds[b]):
        if bounds[b] <= best:
            break
        best = max(best, exact(b))
    return best
