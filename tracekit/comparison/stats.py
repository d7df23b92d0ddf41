"""Statistics of one tensor at one step: how far the replay is from the golden."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from ..store.values import is_ml_dtype
from .blockwise import Summary, float_stats
from .tolerance import Resolved

# Below this many elements the float64 definition is the faster way to the same numbers: the
# blockwise pass's fixed cost (tens of microseconds) outweighs what it saves.
BLOCKWISE_FROM = 2048

# Elements per block of float64_stats: its float64 temporaries stay a few MB.
FLOAT64_BLOCK = 1 << 18


class Stats:
    """Data, no judgement beyond `ok`: max abs error, max rel error (where the golden is not
    zero), mismatched count, worst index, the smallest atol (at the rule's rtol and ulps) and
    rtol (at its atol and ulps) that would pass (inf: no rtol passes a difference at a golden
    zero), and `ulps`: the max abs error in units of eps * the tensor's largest |golden|, the
    smallest `ulps` setting that passes alone (the measure of round-off). `discrete`: integers,
    booleans, strings and structures, compared for equality only: no tolerance applies, and no
    difference of theirs is round-off. `basis`: what the verdict came from: "full" values, or
    where the golden keeps a digest (comparison/digests.py) "digest" (a sample and statistics),
    "bits" (the same bytes) or "whole" (a digest holding every element). `moments`, from a digest:
    how far the tensor moved as a whole, the largest difference of its sum, sum of |x| and norm
    in eps x their own scale (sum of |x| for the sums, the norm for the norm)."""

    __slots__ = ("ok", "total", "mismatched", "max_abs", "max_rel", "worst_index", "needed_atol",
                 "needed_rtol", "nonfinite", "golden_scale", "problem", "atol", "rtol", "ulps", "allowed_ulps",
                 "discrete", "basis", "moments")

    def __init__(self) -> None:
        self.ok = True
        self.total = 0
        self.mismatched = 0
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.worst_index: Optional[Tuple[int, ...]] = None
        self.needed_atol = 0.0
        self.needed_rtol = 0.0
        self.nonfinite = 0  # elements NaN/Inf on one side only, or differently
        self.golden_scale = 0.0  # max |golden|, to tell round-off from real differences
        self.problem: Optional[str] = None  # shape, dtype or structure disagreement
        self.atol = 0.0
        self.rtol = 0.0
        self.ulps = 0.0
        self.allowed_ulps = 0.0
        self.discrete = False
        self.basis = "full"
        self.moments = 0.0

    @property
    def fraction(self) -> float:
        return self.mismatched / self.total if self.total else 0.0

    def to_dict(self) -> Dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def badness(stats: Stats) -> Tuple[int, float, float]:
    """Orders a tensor's steps: failing ones first, then by the atol they would need."""
    return (0 if stats.ok else 1, stats.needed_atol, stats.max_abs)


def compare_values(golden: Any, actual: Any, tol: Resolved) -> Stats:
    stats = Stats()
    stats.atol, stats.rtol, stats.allowed_ulps = tol.atol, tol.rtol, tol.ulps
    g, a = _as_array(golden), _as_array(actual)
    if g is None or a is None:  # structures, strings as Python objects: exact
        stats.total, stats.discrete = 1, True
        if repr(golden) != repr(actual):
            stats.ok, stats.mismatched, stats.problem = False, 1, "values differ"
        return stats
    if g.shape != a.shape:
        stats.ok, stats.total, stats.mismatched = False, max(g.size, 1), max(g.size, 1)
        stats.problem = "shape %s, golden %s" % (a.shape, g.shape)
        return stats
    stats.total = int(g.size)
    if g.size == 0:
        return stats
    floats = _floaty(g.dtype) and _floaty(a.dtype)
    stats.discrete = not floats
    if tol.exact or not floats:
        diff = np.asarray(g != a)
        if floats and tol.equal_nan:
            diff &= ~(np.isnan(g.astype(np.float64)) & np.isnan(a.astype(np.float64)))
        stats = _finish(stats, diff, None, None)
        stats.ulps = 0.0 if stats.ok else float("inf")  # integers, booleans: no round-off to speak of
        if not stats.ok and not floats and g.dtype.kind in "biu" and a.dtype.kind in "biu":
            stats.max_abs = _integer_distance(g, a)  # a counter 7 against 1 is 6 apart, exactly
        return stats
    if _narrow_real(g.dtype) and _narrow_real(a.dtype):
        summary = _same_bits(g, a, tol.eps) or (float_stats(g, a, tol.atol, tol.rtol, tol.ulps, tol.eps)
                                                if g.size >= BLOCKWISE_FROM else None)
        if summary is not None:
            return _from_summary(stats, summary, g.shape)
    return float64_stats(stats, g, a, tol)


def _integer_distance(g: np.ndarray, a: np.ndarray) -> float:
    """The largest |a - g| of two integer (or boolean) arrays, without wrapping (Python integers
    where int64 could overflow: uint64 against int64)."""
    if g.dtype.kind == "u" and g.dtype.itemsize == 8 or a.dtype.kind == "u" and a.dtype.itemsize == 8:
        return float(max(abs(int(x) - int(y)) for x, y in zip(g.reshape(-1).tolist(), a.reshape(-1).tolist())))
    return float(np.max(np.abs(a.astype(np.int64) - g.astype(np.int64))))


def float64_stats(stats: Stats, g: np.ndarray, a: np.ndarray, tol: Resolved) -> Stats:
    """The definition of the statistics, in float64 (NaN and Inf included); blockwise.float_stats
    computes the same numbers faster for narrower floats. A real tensor is taken FLOAT64_BLOCK
    elements at a time: a dozen float64 temporaries of a whole tensor (a float64 port's word
    embeddings: 188 MB each) would be gigabytes for each tensor being compared."""
    kind = np.complex128 if "c" in (g.dtype.kind, a.dtype.kind) else np.float64  # bfloat16 too
    shape, g, a = g.shape, g.reshape(-1), a.reshape(-1)
    step = max(1, g.size if kind is np.complex128 else FLOAT64_BLOCK)
    starts = range(0, g.size, step)
    # the round-off allowance scales with the largest finite |golden|: needed before any verdict
    stats.golden_scale = max((_largest_finite(g[lo:lo + step].astype(kind)) for lo in starts), default=0.0)
    unit = tol.eps * stats.golden_scale  # one ulp of the tensor's scale
    found = _Found(tol, tol.ulps * unit)
    for lo in starts:
        found.block(lo, g[lo:lo + step].astype(kind), a[lo:lo + step].astype(kind))
    if found.nonfinite:
        stats.nonfinite = found.odd
    if found.finite:
        stats.max_abs, stats.max_rel = found.max_abs, found.max_rel
        stats.ulps = stats.max_abs / unit if unit > 0 else (0.0 if stats.max_abs == 0 else float("inf"))
        stats.needed_atol, stats.needed_rtol = max(0.0, found.needed_atol), found.needed_rtol
    stats.mismatched = found.mismatched
    stats.ok = stats.mismatched == 0
    if not stats.ok:  # the first element NaN or Inf on one side only, else the first largest error
        flat = found.worst if found.first_odd is None else found.first_odd
        stats.worst_index = tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()
    return stats


def _largest_finite(g64: np.ndarray) -> float:
    finite = g64[np.isfinite(g64)]
    return float(np.abs(finite).max()) if finite.size else 0.0


class _Found:
    """float64_stats' statistics gathered over blocks: each maximum the largest of the blocks',
    each count their sum, each first index the first block's that has one."""

    def __init__(self, tol: Resolved, roundoff: float) -> None:
        self.tol, self.roundoff = tol, roundoff
        self.mismatched = self.odd = 0
        self.nonfinite = self.finite = False  # any element NaN/Inf on some side; finite on both
        self.max_abs = self.max_rel = self.needed_atol = self.needed_rtol = -np.inf
        self.first_odd: Optional[int] = None
        self.worst, self.worst_err = 0, -np.inf

    def block(self, lo: int, g64: np.ndarray, a64: np.ndarray) -> None:
        tol, roundoff = self.tol, self.roundoff
        finite_g = np.isfinite(g64)
        both = finite_g & np.isfinite(a64)
        err = np.zeros(g64.shape)
        err[both] = np.abs(a64[both] - g64[both])
        scale = np.where(finite_g, np.abs(g64), 0.0)
        bad = np.zeros(g64.shape, dtype=bool)
        bad[both] = err[both] > tol.atol + tol.rtol * scale[both] + roundoff
        nonfinite = ~both
        if nonfinite.any():
            self.nonfinite = True
            same = (g64 == a64) | (np.isnan(g64) & np.isnan(a64) & tol.equal_nan)  # equal infinities pass
            odd = nonfinite & ~same
            self.odd += int(odd.sum())
            bad |= odd
            if self.first_odd is None and odd.any():
                self.first_odd = lo + int(np.argmax(odd))
        if both.any():
            self.finite = True
            e, sc = err[both], scale[both]
            self.max_abs = max(self.max_abs, float(e.max()))
            nonzero = sc > 0  # relative error where the golden is not zero
            self.max_rel = max(self.max_rel, float((e[nonzero] / sc[nonzero]).max()) if nonzero.any() else 0.0)
            self.needed_atol = max(self.needed_atol, float((e - tol.rtol * sc - roundoff).max()))
            over = e - tol.atol - roundoff
            with np.errstate(divide="ignore", invalid="ignore"):  # over > 0 at a golden zero: inf
                need = np.where(over <= 0, 0.0, over / sc)
            self.needed_rtol = max(self.needed_rtol, float(need.max()))
        mismatched = int(bad.sum())
        if mismatched:
            self.mismatched += mismatched
            ranked = np.where(bad, err, -1.0)
            at = int(np.argmax(ranked))
            if ranked[at] > self.worst_err:  # strictly: the first of equal errors stays
                self.worst, self.worst_err = lo + at, float(ranked[at])


def _finish(stats: Stats, bad: np.ndarray, err: Optional[np.ndarray], nonfinite: Optional[np.ndarray]) -> Stats:
    stats.mismatched = int(bad.sum())
    stats.ok = stats.mismatched == 0
    if not stats.ok:
        if nonfinite is not None and stats.nonfinite:
            flat = int(np.argmax((nonfinite & bad).reshape(-1)))
        elif err is not None:
            flat = int(np.argmax(np.where(bad, err, -1.0).reshape(-1)))
        else:
            flat = int(np.argmax(bad.reshape(-1)))
        stats.worst_index = tuple(int(i) for i in np.unravel_index(flat, bad.shape)) if bad.shape else ()
    return stats


def _from_summary(stats: Stats, summary: Summary, shape: Tuple[int, ...]) -> Stats:
    stats.mismatched = summary.mismatched
    stats.ok = summary.mismatched == 0
    stats.golden_scale = summary.golden_scale
    stats.max_abs, stats.max_rel = summary.max_abs, summary.max_rel
    stats.needed_atol, stats.needed_rtol = summary.needed_atol, summary.needed_rtol
    unit = summary.unit
    stats.ulps = stats.max_abs / unit if unit > 0 else (0.0 if stats.max_abs == 0 else float("inf"))
    if summary.worst is not None:
        stats.worst_index = tuple(int(i) for i in np.unravel_index(summary.worst, shape)) if shape else ()
    return stats


def _narrow_real(dtype: np.dtype) -> bool:
    """float32 and narrower real floats: blockwise.float_stats computes their statistics."""
    return dtype.itemsize <= 4 and (dtype.kind == "f" or _is_float_like(dtype))


_PROBE = 1024


def _same_bits(g: np.ndarray, a: np.ndarray, eps: float) -> Optional[Summary]:
    """The statistics of identical finite tensors (inputs, replays on the same machine), read off
    one comparison of their bits; None when they differ or hold NaN or Inf. A probe of the first
    elements spares the full comparison for tensors that differ."""
    if g.dtype != a.dtype:
        return None
    gb = g.reshape(-1).view("u%d" % g.dtype.itemsize)
    ab = a.reshape(-1).view(gb.dtype)
    # one array on both sides (a replay's inputs are the golden's, as it fed them) needs no look
    if g is not a and (not np.array_equal(gb[:_PROBE], ab[:_PROBE]) or not np.array_equal(gb, ab)):
        return None
    g32 = g.reshape(-1).astype(np.float32) if g.dtype != np.float32 else g.reshape(-1)
    scale = max(float(g32.max()), -float(g32.min()))
    if not np.isfinite(scale):
        return None
    return Summary(0, 0.0, 0.0, 0.0, 0.0, None, scale, eps * scale)


def _as_array(value: Any) -> Optional[np.ndarray]:
    if isinstance(value, np.ndarray):
        return None if value.dtype.kind in "OUSV" and not _is_float_like(value.dtype) else value
    if isinstance(value, (np.generic, bool, int, float, complex)):
        arr = np.asarray(value)
        return arr if arr.dtype.kind not in "OUS" else None
    return None


def _is_float_like(dtype: np.dtype) -> bool:
    return is_ml_dtype(dtype) and "float" in dtype.name  # bfloat16, float8_*


def _floaty(dtype: np.dtype) -> bool:
    return dtype.kind in "fc" or _is_float_like(dtype)


def dtype_name(value: Any) -> str:
    """The name tolerance defaults are keyed by ("float32", "bfloat16", ...)."""
    arr = _as_array(value)
    return "object" if arr is None else np.dtype(arr.dtype).name
