"""The statistics of one tensor at one step, computed from their definitions in plain numpy:
every field in float64 (complex128) over the whole tensor, one array expression per field.

Nothing here comes from tracekit's comparison code: the fast paths of comparison/stats.py
and comparison/blockwise.py, and the helpers they share, must give exactly these numbers
(tests/comparison, and every shipped golden through same_as_oracle)."""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import numpy as np

FIELDS = ("ok", "total", "mismatched", "max_abs", "max_rel", "worst_index", "needed_atol", "needed_rtol",
          "nonfinite", "golden_scale", "problem", "atol", "rtol", "ulps", "allowed_ulps", "discrete", "basis",
          "moments")


class OracleStats:
    """The fields a comparison reports of a tensor at a step, by name (tracekit's Stats has the same)."""

    def __init__(self, tol: Any) -> None:
        self.ok, self.total, self.mismatched = True, 0, 0
        self.max_abs = self.max_rel = self.needed_atol = self.needed_rtol = self.golden_scale = self.ulps = 0.0
        self.worst_index: Optional[Tuple[int, ...]] = None
        self.nonfinite = 0
        self.problem: Optional[str] = None
        self.atol, self.rtol, self.allowed_ulps = tol.atol, tol.rtol, tol.ulps
        self.discrete, self.basis = False, "full"
        self.moments = 0.0  # digests only

    @property
    def fraction(self) -> float:
        return self.mismatched / self.total if self.total else 0.0

    def to_dict(self) -> Dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS}


def _float_like(dtype: np.dtype) -> bool:
    """Real or complex floats, and the ml_dtypes floats (bfloat16, float8_*: numpy kind "V")."""
    return dtype.kind in "fc" or (dtype.kind == "V" and "float" in dtype.name)


def _array(value: Any) -> Optional[np.ndarray]:
    """The value as an array of numbers, or None for what is compared as a Python object."""
    if isinstance(value, np.ndarray):
        return value if value.dtype.kind not in "OUSV" or _float_like(value.dtype) else None
    if isinstance(value, (np.generic, bool, int, float, complex)):
        arr = np.asarray(value)
        return None if arr.dtype.kind in "OUS" else arr
    return None


def _first(mask: np.ndarray) -> Tuple[int, ...]:
    """The index of the first True element of a boolean array, in C order."""
    flat = int(np.flatnonzero(mask.reshape(-1))[0])
    return tuple(int(i) for i in np.unravel_index(flat, mask.shape)) if mask.shape else ()


def oracle_values(golden: Any, actual: Any, tol: Any) -> OracleStats:
    out = OracleStats(tol)
    g, a = _array(golden), _array(actual)
    if g is None or a is None:  # structures and strings: equal by their repr
        out.total, out.discrete = 1, True
        if repr(golden) != repr(actual):
            out.ok, out.mismatched, out.problem = False, 1, "values differ"
        return out
    if g.shape != a.shape:
        out.ok = False
        out.total = out.mismatched = max(g.size, 1)
        out.problem = "shape %s, golden %s" % (a.shape, g.shape)
        return out
    out.total = int(g.size)
    if not g.size:
        return out
    floats = _float_like(g.dtype) and _float_like(a.dtype)
    out.discrete = not floats
    if tol.exact or not floats:  # equality, element by element (NaN equal to NaN where allowed)
        differ = np.asarray(g != a)
        if floats and tol.equal_nan:
            differ = differ & ~(np.isnan(g.astype(np.float64)) & np.isnan(a.astype(np.float64)))
        out.mismatched = int(np.count_nonzero(differ))
        out.ok = out.mismatched == 0
        out.ulps = 0.0 if out.ok else math.inf
        if not out.ok:
            out.worst_index = _first(differ)
            if not floats and g.dtype.kind in "biu" and a.dtype.kind in "biu":  # integers: how far apart, exactly
                out.max_abs = float(max(abs(int(x) - int(y)) for x, y in zip(g.reshape(-1).tolist(),
                                                                             a.reshape(-1).tolist())))
        return out
    wide = np.complex128 if g.dtype.kind == "c" or a.dtype.kind == "c" else np.float64
    g64, a64 = g.astype(wide), a.astype(wide)
    g_ok, a_ok = np.isfinite(g64), np.isfinite(a64)
    finite = g_ok & a_ok
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(finite, np.abs(a64 - g64), 0.0)
    scale = np.where(g_ok, np.abs(g64), 0.0)  # |golden|, 0 where the golden is NaN or Inf
    out.golden_scale = float(scale.max(initial=0.0, where=g_ok))
    unit = tol.eps * out.golden_scale  # an ulp at the tensor's largest |golden|
    roundoff = tol.ulps * unit
    allowed = tol.atol + tol.rtol * scale + roundoff
    failing = finite & (err > allowed)
    # A NaN or Inf passes only against the same value (NaN against NaN where equal_nan allows).
    same = (g64 == a64) | (np.isnan(g64) & np.isnan(a64) & bool(tol.equal_nan))
    odd = ~finite & ~same
    out.nonfinite = int(np.count_nonzero(odd))
    failing |= odd
    if finite.any():
        out.max_abs = float(err.max(where=finite, initial=0.0))
        relative = finite & (scale > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            out.max_rel = float(np.where(relative, err / np.where(relative, scale, 1.0), 0.0).max())
        if unit > 0:
            out.ulps = out.max_abs / unit
        else:
            out.ulps = 0.0 if out.max_abs == 0 else math.inf
        out.needed_atol = max(0.0, float((err - tol.rtol * scale - roundoff).max(where=finite, initial=-math.inf)))
        excess = err - tol.atol - roundoff  # what rtol * |golden| must cover
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.where(excess > 0, excess / scale, 0.0)  # inf where the golden is zero
        out.needed_rtol = float(need.max(where=finite, initial=0.0))
    out.mismatched = int(np.count_nonzero(failing))
    out.ok = out.mismatched == 0
    if not out.ok:
        if out.nonfinite:  # the first NaN or Inf that fails
            out.worst_index = _first(odd)
        else:  # the first of the largest errors among the failing elements
            worst = err.max(where=failing, initial=-1.0)
            out.worst_index = _first(failing & (err == worst))
    return out


def same_as_oracle(golden: Any, actual: Any, tolerance: Any = None) -> None:
    """Compare twice, with tracekit's statistics and with the oracle's; assert every result
    agrees: each tensor's statistics at each step, the first divergence, what is missing."""
    import tracekit
    from unittest import mock

    fast = tracekit.compare(golden, actual, tolerance)
    with mock.patch("tracekit.comparison.comparer.compare_values", oracle_values):
        slow = tracekit.compare(golden, actual, tolerance)
    assert [t.key for t in fast.tensors] == [t.key for t in slow.tensors]
    for f, s in zip(fast.tensors, slow.tensors):
        assert {k: v.to_dict() for k, v in f.by_step.items()} == {k: v.to_dict() for k, v in s.by_step.items()}, f.key
    assert repr(fast.first_divergence) == repr(slow.first_divergence)
    assert (fast.missing, fast.not_compared, fast.ok) == (slow.missing, slow.not_compared, slow.ok)
