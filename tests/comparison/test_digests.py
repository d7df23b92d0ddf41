"""Verdicts from digests: never a failure where the full comparison passes, never a pass where
the sample fails, and a departure the statistics show caught wherever it lies."""

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from tracekit.comparison.digests import BITS, DIGEST, WHOLE, compare_digests
from tracekit.comparison.stats import compare_values
from tracekit.comparison.tolerance import Tolerance
from tracekit.report.comparison import describe
from tracekit.store.digest import digest, positions

sizes = st.integers(1001, 6000)
tolerances = st.builds(lambda atol, rtol, ulps: Tolerance(atol=atol, rtol=rtol, ulps=ulps),
                       st.sampled_from([0.0, 1e-7, 1e-5, 1e-3]), st.sampled_from([0.0, 1e-6, 1e-3]),
                       st.sampled_from([0.0, 64.0, 2048.0]))


def _pair(seed, n, scale):
    rng = np.random.RandomState(seed)
    return (rng.randn(n) * scale).astype(np.float32), rng


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2 ** 31 - 1), sizes, st.sampled_from([1e-3, 1.0, 1e3]), tolerances, st.floats(0.0, 1.0))
def test_what_passes_in_full_passes_from_digests(seed, n, scale, tolerance, share):
    """No false alarm: every statistic's bound follows from every element passing."""
    g, rng = _pair(seed, n, scale)
    tol = tolerance.resolve("grad", "w", 3, "float32")
    allowed = tol.atol + tol.rtol * np.abs(g) + tol.ulps * tol.eps * np.abs(g).max()
    a = (g + share * allowed * rng.uniform(-1, 1, n)).astype(np.float32)
    assume(compare_values(g, a, tol).ok)
    stats = compare_digests(digest(g), digest(a), tol)
    assert stats.ok, stats.problem
    assert stats.basis in (DIGEST, BITS)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2 ** 31 - 1), sizes, tolerances, st.integers(0, 999), st.floats(2.0, 1e3))
def test_a_sampled_departure_always_fails(seed, n, tolerance, which, times):
    g, _ = _pair(seed, n, 1.0)
    tol = tolerance.resolve("grad", "w", 3, "float32")
    where = positions(n)[which]
    a = g.copy()
    a[where] += times * (tol.atol + tol.rtol * abs(g[where]) + tol.ulps * tol.eps * np.abs(g).max()) + 1e-30
    assume(not compare_values(g, a, tol).ok)
    stats = compare_digests(digest(g), digest(a), tol)
    assert not stats.ok and stats.worst_index == (where,)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2 ** 31 - 1), st.integers(4000, 20000))
def test_a_shift_of_the_unsampled_elements_fails_from_the_statistics(seed, n):
    g, _ = _pair(seed, n, 1.0)
    tol = Tolerance().resolve("var", "w", 3, "float32")
    unsampled = np.setdiff1d(np.arange(n), positions(n))
    a = g.copy()
    a[unsampled] += 1e-3  # only elements the sample does not hold
    stats = compare_digests(digest(g), digest(a), tol)
    # the lower bound is 1e-3 up to the float32 rounding of the shifted elements (half an ulp of the largest)
    assert not stats.ok and "sum differs" in stats.problem
    assert stats.max_abs <= 1e-3 + np.finfo(np.float32).eps * np.abs(a).max()


def test_equal_bytes_pass_at_once_and_whole_digests_compare_in_full():
    g = np.linspace(-1, 1, 4000, dtype=np.float32)
    assert compare_digests(digest(g), digest(g.copy()), Tolerance.exact().resolve("var", "w", 0, "float32")).basis == BITS
    small = g[:500]
    stats = compare_digests(digest(small), digest(small + np.float32(1)), Tolerance().resolve("var", "w", 0, "float32"))
    assert stats.basis == WHOLE and stats.mismatched == 500


def test_integers_compare_exactly_by_their_bytes():
    g = np.arange(5000, dtype=np.int64)
    a = g.copy()
    a[np.setdiff1d(np.arange(5000), positions(5000))[0]] += 1
    tol = Tolerance().resolve("input", "ids", 0, "int64")
    stats = compare_digests(digest(g), digest(a), tol)
    assert not stats.ok and "crc32" in stats.problem
    assert compare_digests(digest(g), digest(g.copy()), tol).ok


@pytest.mark.parametrize("golden_nan, actual_nan, equal_nan, ok", [(1, 1, True, True), (1, 1, False, False),
                                                                   (1, 2, True, False), (0, 1, True, False)])
def test_nan_counts(golden_nan, actual_nan, equal_nan, ok):
    base = np.linspace(-1, 1, 3000, dtype=np.float32)
    g, a = base.copy(), base.copy() * np.float32(1 + 1e-7)
    unsampled = np.setdiff1d(np.arange(3000), positions(3000))
    g[unsampled[:golden_nan]] = np.nan
    a[unsampled[:actual_nan]] = np.nan
    tol = Tolerance(equal_nan=equal_nan).resolve("var", "w", 0, "float32")
    assert compare_digests(digest(g), digest(a), tol).ok == ok


def test_other_shapes_fail():
    stats = compare_digests(digest(np.zeros((40, 50), np.float32)), digest(np.zeros((50, 40), np.float32)),
                            Tolerance().resolve("var", "w", 0, "float32"))
    assert not stats.ok and "shape" in stats.problem


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2 ** 31 - 1), st.integers(20000, 60000), st.sampled_from([1e-2, 1.0]))
def test_a_moments_bound_catches_a_whole_tensor_scaled_that_the_elementwise_envelope_holds(seed, n, scale):
    # Adam's noise-floor flips widen an envelope elementwise to about a learning rate; a layer
    # scaled by 1 + 1e-3 stays inside that, element by element, but moves its norm 8389 eps.
    g, rng = _pair(seed, n, scale)
    wide = Tolerance(atol=0, rtol=0, ulps=2.0 ** 17)
    scaled = (g * np.float32(1 + 1e-3)).astype(np.float32)
    noisy = (g + 64 * np.finfo(np.float32).eps * np.abs(g).max() * rng.uniform(-1, 1, n)).astype(np.float32)
    loose, bounded = wide.resolve("var", "w", 8, "float32"), wide.rule(moments=2048).resolve("var", "w", 8, "float32")
    assert compare_digests(digest(g), digest(scaled), loose).ok  # the elementwise bound alone holds it
    caught = compare_digests(digest(g), digest(scaled), bounded)
    assert not caught.ok and "the drift envelope allows" in caught.problem
    assert caught.moments == pytest.approx(1e-3 / np.finfo(np.float32).eps, rel=0.02)
    kept = compare_digests(digest(g), digest(noisy), bounded)  # round-off moves the whole far less
    assert kept.ok and 0 < kept.moments < 2048
    told = "\n".join(describe(caught))  # no atol would pass it: the report asks for none
    assert "the drift envelope allows" in told and "would need atol" not in told


def test_moments_are_measured_from_digests_only_and_an_unset_bound_changes_nothing():
    g = np.linspace(-1, 1, 5000, dtype=np.float32)
    a = (g * np.float32(1.01)).astype(np.float32)
    tol = Tolerance(atol=0.1).resolve("var", "w", 3, "float32")
    assert tol.moments == float("inf")
    assert compare_digests(digest(g), digest(a), tol).ok  # 1% is within atol=0.1 everywhere
    assert compare_values(g, a, tol).moments == 0.0  # a full comparison has its elements


def test_one_pass_statistics_are_the_float64_ones_and_a_recording_keeps_no_float_crc(monkeypatch):
    from tracekit.store import digest as module

    rng = np.random.default_rng(5)
    x = rng.standard_normal(5003).astype(np.float32)
    x[[7, 4000]] = [np.nan, -np.inf]
    monkeypatch.setattr(module, "BLOCK", 64)  # many blocks, a short last one
    d = digest(x)
    finite = x[np.isfinite(x)].astype(np.float64)
    assert (d.nan, d.inf, d.count) == (1, 1, 5003)
    assert np.isclose(d.sum, finite.sum(), rtol=1e-12) and np.isclose(d.sumsq, (finite ** 2).sum(), rtol=1e-12)
    assert np.isclose(d.sumabs, np.abs(finite).sum(), rtol=1e-12)
    assert (d.min, d.max, d.maxabs) == (finite.min(), finite.max(), np.abs(finite).max())
    ids = np.arange(3000, dtype=np.int64)
    assert module.recorded(x).crc is None and module.recorded(ids).crc == digest(ids).crc is not None
    assert np.isnan(digest(np.array([np.nan], np.float32)).min) and digest(np.array([], np.float32)).count == 0
