"""Statistics of one tensor: errors, mismatches, worst index, and the tolerance that would pass."""

from __future__ import annotations

import numpy as np
import pytest

from tracekit.comparison.stats import compare_values
from tracekit.comparison.tolerance import Resolved

from ..support import payloads


def tol(atol=1e-5, rtol=1e-6, equal_nan=False, exact=False):
    return Resolved(atol, rtol, equal_nan, False, exact)


def test_numbers():
    g = np.array([[1.0, 2.0], [3.0, 0.0]], dtype=np.float32)
    a = g + np.array([[0, 1e-3], [0, 2e-6]], dtype=np.float32)
    s = compare_values(g, a, tol())
    assert not s.ok and s.mismatched == 1 and s.total == 4 and s.worst_index == (0, 1)
    assert s.max_abs == pytest.approx(1e-3, rel=1e-3) and s.max_rel == pytest.approx(5e-4, rel=1e-3)
    assert s.golden_scale == 3.0
    # the reported smallest tolerances really pass, each at the rule's other setting
    assert compare_values(g, a, tol(atol=s.needed_atol * (1 + 1e-9))).ok
    assert compare_values(g, a, tol(rtol=s.needed_rtol * (1 + 1e-9))).ok
    assert compare_values(g, g.copy(), tol()).ok


def test_nan_and_inf():
    g = np.array([1.0, np.nan, np.inf, -np.inf, 2.0])
    assert compare_values(g, g.copy(), tol(equal_nan=True)).ok
    s = compare_values(g, g.copy(), tol())
    assert not s.ok and s.mismatched == 1 and s.nonfinite == 1  # NaN == NaN only with equal_nan
    one_side = compare_values(np.array([1.0, 2.0]), np.array([1.0, np.nan]), tol(equal_nan=True))
    assert not one_side.ok and one_side.nonfinite == 1 and one_side.worst_index == (1,)
    assert not compare_values(np.array([np.inf]), np.array([-np.inf]), tol()).ok


def test_shapes_and_exact_kinds():
    s = compare_values(np.zeros((2, 3)), np.zeros((3, 2)), tol())
    assert not s.ok and "shape (3, 2), golden (2, 3)" in s.problem
    assert not compare_values(np.array([1, 2]), np.array([1, 3]), tol()).ok  # integers: exact
    assert compare_values(np.float32(1.0), np.float32(1.0 + 1e-7), tol()).ok
    assert not compare_values(np.array([1.0]), np.array([1.0 + 1e-9]), tol(exact=True)).ok
    assert compare_values([None, {"a": 1}], [None, {"a": 1}], tol()).ok
    assert not compare_values(np.array([b"x"], dtype=object), np.array([b"y"], dtype=object), tol()).ok


def test_bfloat16():
    bfloat16 = payloads.bfloat16()  # ml_dtypes' on TF 2, TF 1.15's own on the legacy side
    g = np.array([1.0, 2.0], dtype=np.float32).astype(bfloat16)
    a = np.array([1.0, 2.015625], dtype=np.float32).astype(bfloat16)  # one bfloat16 ulp at 2
    assert compare_values(g, a, tol(atol=2e-2)).ok
    assert not compare_values(g, a, tol(atol=1e-3, rtol=0)).ok


def test_ulps_measure_error_against_the_tensors_scale():
    g = np.array([4.0, 0.001, -2.0], dtype=np.float32)
    eps = 2.0 ** -23
    a = g + np.array([0, 3 * eps * 4, 0], dtype=np.float64).astype(np.float32)  # 3 ulps of the scale (4.0)
    s = compare_values(g, a, tol(atol=0, rtol=0))
    assert not s.ok and s.ulps == pytest.approx(3, rel=1e-3)  # relative to the element it would be ~1e4
    passes = Resolved(0, 0, False, False, False, ulps=3.01)
    assert compare_values(g, a, passes).ok and compare_values(g, a, passes).allowed_ulps == 3.01
    assert not compare_values(g, a, Resolved(0, 0, False, False, False, ulps=2.9)).ok
    # the needed atol and rtol count the allowance as already given
    partial = Resolved(0, 0, False, False, False, ulps=2)
    s = compare_values(g, a, partial)
    assert s.needed_atol == pytest.approx(eps * 4, rel=1e-3)
    # float64 counts in float64's eps; an all-zero golden has no scale: any error is infinite ulps
    g64 = np.array([1.0, 2.0])
    assert compare_values(g64, g64 + 2 * 2.0 ** -52 * 2, Resolved(0, 0, False, False, False, eps=2.0 ** -52)).ulps \
        == pytest.approx(2, rel=1e-6)
    assert compare_values(np.zeros(2, "f4"), np.full(2, 1e-30, "f4"), tol(0, 0)).ulps == float("inf")


def test_a_differing_integer_is_never_round_off():
    s = compare_values(np.array([3], np.int64), np.array([4], np.int64), tol())
    assert not s.ok and s.ulps == float("inf")  # a step counter off by one is not a machine's doing
    assert compare_values(np.array([3], np.int64), np.array([3], np.int64), tol()).ulps == 0
