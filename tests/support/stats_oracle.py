"""The statistics as tracekit first defined them: every field in float64 over the whole tensor.
The fast paths of comparison/stats.py must give exactly these numbers (tests/comparison)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tracekit.comparison.stats import Stats, _as_array, _finish, _floaty
from tracekit.comparison.tolerance import Resolved


def oracle_values(golden: Any, actual: Any, tol: Resolved) -> Stats:
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
        return stats
    g64 = g.astype(np.complex128 if "c" in (g.dtype.kind, a.dtype.kind) else np.float64)  # bfloat16 too
    a64 = a.astype(g64.dtype)
    finite_g, finite_a = np.isfinite(g64), np.isfinite(a64)
    both = finite_g & finite_a
    err = np.zeros(g64.shape)
    err[both] = np.abs(a64[both] - g64[both])
    scale = np.where(finite_g, np.abs(g64), 0.0)
    stats.golden_scale = float(scale[finite_g].max()) if finite_g.any() else 0.0
    unit = tol.eps * stats.golden_scale  # one ulp of the tensor's scale
    roundoff = tol.ulps * unit
    bad = np.zeros(g64.shape, dtype=bool)
    bad[both] = err[both] > tol.atol + tol.rtol * scale[both] + roundoff
    nonfinite = ~both
    if nonfinite.any():
        same = (g64 == a64) | (np.isnan(g64) & np.isnan(a64) & tol.equal_nan)  # equal infinities pass
        odd = nonfinite & ~same
        stats.nonfinite = int(odd.sum())
        bad |= odd
    if both.any():
        stats.max_abs = float(err[both].max())
        nonzero = both & (scale > 0)  # relative error where the golden is not zero
        stats.max_rel = float((err[nonzero] / scale[nonzero]).max()) if nonzero.any() else 0.0
        stats.ulps = stats.max_abs / unit if unit > 0 else (0.0 if stats.max_abs == 0 else float("inf"))
        stats.needed_atol = float(max(0.0, (err[both] - tol.rtol * scale[both] - roundoff).max()))
        over = err[both] - tol.atol - roundoff
        with np.errstate(divide="ignore", invalid="ignore"):  # over > 0 at a golden zero: inf
            need = np.where(over <= 0, 0.0, over / scale[both])
        stats.needed_rtol = float(need.max())
    return _finish(stats, bad, err, nonfinite)


def same_as_oracle(golden: Any, actual: Any, tolerance: Any = None) -> None:
    """Compare twice, with tracekit's statistics and with the oracle's; assert every result
    agrees: each tensor's statistics at each step, the first divergence, what is missing."""
    import tracekit
    from unittest import mock

    fast = tracekit.compare(golden, actual, tolerance)
    with mock.patch("tracekit.comparison.engine.compare_values", oracle_values):
        slow = tracekit.compare(golden, actual, tolerance)
    assert [t.key for t in fast.tensors] == [t.key for t in slow.tensors]
    for f, s in zip(fast.tensors, slow.tensors):
        assert {k: v.to_dict() for k, v in f.by_step.items()} == {k: v.to_dict() for k, v in s.by_step.items()}, f.key
    assert repr(fast.first_divergence) == repr(slow.first_divergence)
    assert (fast.missing, fast.not_compared, fast.ok) == (slow.missing, slow.not_compared, slow.ok)
