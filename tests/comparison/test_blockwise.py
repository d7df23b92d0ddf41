"""The blockwise float32 statistics are the float64 ones, bit for bit (tests/support/stats_oracle.py
holds the float64 definition): on random tensors of every shape the pass meets (several blocks,
golden zeros, ties, errors at the threshold, narrower dtypes) and on the edge cases."""

from __future__ import annotations

import numpy as np
import pytest

from tracekit.comparison import blockwise, stats
from tracekit.comparison.stats import compare_values
from tracekit.comparison.tolerance import EPSILON, Resolved

from ..support import payloads
from ..support.stats_oracle import oracle_values


@pytest.fixture(autouse=True)
def blockwise_at_every_size(monkeypatch):
    # compare_values leaves small tensors to the float64 definition; here every size takes the pass
    monkeypatch.setattr(stats, "BLOCKWISE_FROM", 0)


def tol(atol=1e-5, rtol=1e-6, ulps=0.0, eps=EPSILON["float32"]):
    return Resolved(atol, rtol, False, False, False, ulps, eps)


def same(g, a, t):
    fast, slow = compare_values(g, a, t).to_dict(), oracle_values(g, a, t).to_dict()
    assert fast == slow, {k: (fast[k], slow[k]) for k in fast if fast[k] != slow[k]}
    return fast


def random_case(rng):
    n = int(rng.choice([1, 7, 1000, blockwise.BLOCK, blockwise.BLOCK + 1, 3 * blockwise.BLOCK - 5]))
    g = (rng.randn(n) * 10.0 ** rng.randint(-8, 4)).astype(np.float32)
    pattern = rng.randint(6)
    if pattern == 0:
        g[rng.rand(n) < 0.5] = 0  # ReLU outputs: golden zeros
    elif pattern == 1:
        g = np.round(g)  # ties everywhere
    mask = rng.rand(n) < rng.choice([0.0, 0.001, 0.5, 1.0])
    a = (g + rng.randn(n) * 10.0 ** rng.randint(-9, 0) * mask).astype(np.float32)
    if pattern == 2:
        a = (g + np.float32(1e-5) * np.sign(rng.randn(n))).astype(np.float32)  # errors at atol
    elif pattern == 3:
        a[rng.rand(n) < 0.01] = 0
    elif pattern == 4:
        a = (g * (1 + 1e-6)).astype(np.float32)  # errors at rtol
    t = tol(float(rng.choice([0, 1e-8, 1e-5, 1.0])), float(rng.choice([0, 1e-6, 1e-3])),
            float(rng.choice([0, 4, 1024])))
    return g, a, t


@pytest.mark.parametrize("seed", range(4))
def test_random_tensors_equal_the_float64_statistics(seed):
    rng = np.random.RandomState(seed)
    for _ in range(60):
        same(*random_case(rng))


def test_narrower_and_mixed_dtypes():
    rng = np.random.RandomState(7)
    bfloat16 = payloads.bfloat16()
    for _ in range(20):
        g, a, t = random_case(rng)
        same(g.astype(np.float16), a.astype(np.float16), t)
        same(g.astype(bfloat16), a.astype(bfloat16), t)
        same(g, a.astype(np.float16), t)  # a mixed-precision port against a float32 golden
        same(g.reshape(1, -1), a.reshape(1, -1), t)


def test_worst_index_is_the_first_of_equal_errors_across_blocks():
    g = np.zeros(3 * blockwise.BLOCK, np.float32)
    a = g.copy()
    a[[5, blockwise.BLOCK + 3, 2 * blockwise.BLOCK + 1]] = 1.0  # three equal worst errors
    s = same(g, a, tol())
    assert s["worst_index"] == (5,) and s["mismatched"] == 3
    a[2 * blockwise.BLOCK + 1] = 2.0
    assert same(g, a, tol())["worst_index"] == (2 * blockwise.BLOCK + 1,)


def test_what_float32_cannot_decide_goes_to_float64():
    big = np.float32(3e38)
    same(np.array([big, -big]), np.array([-big, big]), tol())  # differences overflow float32
    same(np.array([1.0, np.nan], np.float32), np.array([1.0, np.nan], np.float32), tol())
    same(np.array([1.0, np.inf], np.float32), np.array([1.0, 2.0], np.float32), tol())
    same(np.array([1.0, 2.0], np.float32), np.array([1.0, 2.0], np.float32), tol(atol=1e300))
    same(np.array([1e-45, 0.0], np.float32), np.array([0.0, 1e-45], np.float32), tol(atol=0, rtol=0))
    assert blockwise.float_stats(np.array([np.nan], np.float32), np.array([1.0], np.float32), 0, 0, 0, 1) is None


def test_identical_tensors_skip_the_pass():
    g = np.random.RandomState(0).randn(1000).astype(np.float32)
    s = same(g, g.copy(), tol(ulps=4))
    assert s["ok"] and s["max_abs"] == 0 and s["golden_scale"] == float(np.abs(g).max())
    nan = np.array([np.nan, 1.0], np.float32)
    assert not same(nan, nan.copy(), tol())["ok"]  # NaN == NaN only with equal_nan: not a bit-equal pass


def test_verdicts_within_float32_round_off_of_the_threshold():
    # Thresholds a hair above or below an error: float32 alone would decide some of these wrongly.
    rng = np.random.RandomState(3)
    for _ in range(200):
        g = rng.randn(4).astype(np.float32)
        a = (g + rng.randn(4).astype(np.float32) * np.float32(1e-3)).astype(np.float32)
        err = float(abs(np.float64(a[0]) - np.float64(g[0])))
        hair = 1 + float(rng.choice([-1, 1])) * 2.0 ** -int(rng.randint(18, 40))
        same(g, a, tol(atol=0, rtol=err / abs(float(g[0])) * hair))  # err against rtol * |golden|
        same(g, a, tol(atol=err * hair, rtol=0))  # over = err - atol within a hair of zero


def test_a_threshold_of_subnormal_terms_is_decided_in_float64():
    # atol 2.5 and rtol * |golden| 0.5 units of the smallest subnormal: float64's threshold is 3
    # units, float32 rounds both terms to even (2 + 0), and an error of 3 units would look 1.5x over.
    unit = 2.0 ** -149
    s = same(np.array([8 * unit], np.float32), np.array([11 * unit], np.float32), tol(atol=2.5 * unit, rtol=1 / 16))
    assert s["ok"] and s["mismatched"] == 0


def test_needed_rtol_where_the_error_cancels_against_atol(monkeypatch):
    # Block A's over = error - atol is 1.49 float32 units, of which float32 sees 1 (atol rounds up):
    # its bound would fall below block B's needed_rtol, and the search would stop before A.
    monkeypatch.setattr(blockwise, "BLOCK", 4)
    unit = 2.0 ** -40  # float32's spacing in [2**-17, 2**-16)
    c32 = float(np.float32(2.0 ** -17 * 1.3))  # a float32 value; atol lies just below it
    atol = c32 - 0.49 * unit
    g_a = np.float32(2.0 ** -17 * 1.1)
    a_a = np.float32(float(g_a) + c32 + unit)
    need_a = (float(a_a) - float(g_a) - atol) / float(g_a)
    g_b = np.float32(0.25)
    a_b = np.float32(0.25 + 9.953975677490234e-06)  # over = 3.6e-8, float32 sees it within 2**-8
    need_b = (float(a_b) - float(g_b) - atol) / float(g_b)
    assert unit / float(g_a) * 1.01 < need_b < need_a  # between A's float32 estimate and its truth
    g = np.array([g_a, 0, 0, 0, g_b, 0, 0, 0], np.float32)
    a = np.array([a_a, 0, 0, 0, a_b, 0, 0, 0], np.float32)
    assert same(g, a, tol(atol=atol, rtol=0.0))["needed_rtol"] == need_a


@pytest.mark.parametrize("block", [None, 1000])
@pytest.mark.parametrize("seed", range(3))
def test_the_float64_and_equality_paths_equal_the_definition(seed, block, monkeypatch):
    # float64 and complex tensors, NaN and Inf, integers and exact rules: compare_values' other
    # paths (and the helpers they share with the pass) against the independent definition; the
    # float64 path taken in its own blocks too (block: many of them in every tensor of the case).
    if block is not None:
        monkeypatch.setattr(stats, "FLOAT64_BLOCK", block)
    rng = np.random.RandomState(100 + seed)
    for _ in range(40):
        g, a, t = random_case(rng)
        g64, a64 = g.astype(np.float64), a.astype(np.float64)
        same(g64, a64, t)
        if g.size > 1:  # NaN and Inf at random places, on one side or both
            for side in (g64, a64):
                side[rng.randint(g.size)] = rng.choice([np.nan, np.inf, -np.inf])
            same(g64, a64, t)
            same(g64, a64, Resolved(t.atol, t.rtol, True, False, False, t.ulps, t.eps))  # equal_nan
            same(g.astype(np.float32), np.where(np.isnan(a64), np.nan, a).astype(np.float32), t)
        g_c, a_c = g64.astype(complex), a64.astype(complex)
        g_c.imag, a_c.imag = a64, g64  # complex, NaN and Inf in either part
        same(g_c, a_c, t)
        same(np.round(g * 3).astype(np.int32), np.round(a * 3).astype(np.int32), t)
        same(g, a, Resolved(t.atol, t.rtol, False, False, True, t.ulps, t.eps))  # an exact rule
    same(np.array(["a", "b"]), np.array(["a", "c"]), tol())  # strings: equal as Python objects
    same(np.zeros((2, 3)), np.zeros((3, 2)), tol())  # shapes disagree
    same(np.float64(1.5), 1.5 + 1e-3, tol())  # scalars


@pytest.mark.parametrize("block", [1, 2, 3, 4, 64])
def test_float64_blocks_keep_the_first_of_equal_errors_and_the_first_odd_element(block, monkeypatch):
    monkeypatch.setattr(stats, "FLOAT64_BLOCK", block)
    g = np.zeros(9)
    a = np.array([0, 0, 0.5, 0, 0, 0.5, 0, 0.25, 0])  # equal largest errors in different blocks
    assert same(g, a, tol())["worst_index"] == (2,)
    a[[4, 6]] = [np.inf, np.nan]  # NaN or Inf on one side only comes first, wherever the errors are
    assert same(g, a, tol())["worst_index"] == (4,)
    g[4] = np.inf  # equal infinities pass
    assert same(g, a, tol())["worst_index"] == (6,)
    assert same(g.reshape(3, 3), a.reshape(3, 3), tol())["worst_index"] == (2, 0)
