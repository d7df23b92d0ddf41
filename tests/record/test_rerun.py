"""The judgments re-executing an update makes (record/rerun.py, record/claims.py), on values
alone: a re-executed tensor against the recorded one, whether a scalar is the rate of a step,
and what a slot is."""

from __future__ import annotations

import numpy as np

from tracekit.record.claims import REFUTED, UNDECIDED, VERIFIED, _is_rate, _role
from tracekit.record.roundoff import compare

F = np.float32


def test_a_re_executed_tensor_is_held_to_the_recorded_one_in_ulps_of_scale():
    recorded = np.array([1.0, -2.0, 0.0], F)
    assert compare(recorded, recorded.copy(), recorded)[0] == 0.0
    one_ulp = recorded.copy()
    one_ulp[1] = np.nextafter(F(-2.0), F(-3.0))
    assert compare(recorded, one_ulp)[0] == 1.0
    # a step 1.5 times as long, on a weight of 1 moved by 1e-3: hundreds of ulps, located
    before = np.ones(3, F)
    after = (before - F(1e-3)).astype(F)
    planted = (before - F(1.5e-3)).astype(F)
    ulps, diff, where = compare(after, planted, before)
    assert ulps > 1000 and abs(diff - 5e-4) < 1e-6 and where.startswith("at [0]")
    assert compare(after, after[:2])[0] == float("inf")


def _runs(rate, addend, g, before):
    """The variable after `before - (rate * s + addend) * g`, the rate at 0x, 1x and 2x."""
    return [{"w": (before - (rate * s + addend) * g).astype(F)} for s in (0.0, 1.0, 2.0)]


def test_a_rate_scales_the_share_of_the_step_it_multiplies():
    before, g = np.array([0.5, -0.25], F), np.array([1.0, 2.0], F)
    lr0, base, lr2 = _runs(0.1, 0.0, g, before)
    assert _is_rate("w", before, base, lr0, lr2)[0] == VERIFIED
    # momentum carried in beside the rate's share: still its rate (affine in it)
    carry = [{"w": (r["w"] - F(0.05)).astype(F)} for r in (lr0, base, lr2)]
    assert _is_rate("w", before, carry[1], carry[0], carry[2])[0] == VERIFIED


def test_a_tiny_addend_is_no_rate_and_a_step_of_nothing_tells_nothing():
    before, g = np.array([0.5, -0.25], F), np.array([1.0, 2.0], F)
    # (rate + 1e-30 * y): scaling the 1e-30 moves nothing
    same = [{"w": (before - F(0.1) * g).astype(F)}] * 3
    verdict, detail = _is_rate("w", before, same[1], same[0], same[2])
    assert verdict == REFUTED and "not the learning rate" in detail
    # a scalar that scales the step by its square is no factor of it
    sq = [{"w": (before - F(0.1 * s * s) * g).astype(F)} for s in (0.0, 1.0, 2.0)]
    assert _is_rate("w", before, sq[1], sq[0], sq[2])[0] == REFUTED
    # a rate of 0 (a warmup's first step): the only move is the addend's 1e-34 on a bias at 0
    zero = np.zeros(2, F)
    tiny = [{"w": (zero - F(1e-34 * s) * g).astype(F)} for s in (0.0, 1.0, 2.0)]
    assert _is_rate("w", zero, tiny[1], tiny[0], tiny[2])[0] == UNDECIDED


def test_a_slot_is_named_by_what_the_update_does_with_the_gradient():
    g = np.array([[1.0, -2.0, 0.5], [0.25, 1.0, -1.0]], F)

    def runs(f, before):
        """The slot after the step with the gradient at 0x, 1x, 2x, and its first row at 2x."""
        row = g.copy()
        row[0] *= 2
        return [{"s": f(before, x).astype(F)} for x in (0 * g, g, 2 * g, row)]

    def role(f, before):
        zero, base, double, one_row = runs(f, before)
        return _role(before, base["s"], zero, double, one_row, "s", g.shape)

    full = np.zeros_like(g)
    assert role(lambda s, x: 0.9 * s + 0.1 * x, full) == "first moment"
    assert role(lambda s, x: 0.999 * s + 0.001 * x * x, full) == "second moment"
    assert role(lambda s, x: s + x * x, np.full_like(g, 0.1)) == "accumulated squared gradient"
    rows, columns = np.zeros(2, F), np.zeros(3, F)
    assert role(lambda s, x: 0.5 * s + 0.5 * (x * x).mean(-1), rows) == "second moment, factored: rows"
    assert role(lambda s, x: 0.5 * s + 0.5 * (x * x).mean(-2), columns) == "second moment, factored: columns"
    assert role(lambda s, x: s + 1.0, full) == "state the gradient does not move"


def test_the_judgments_a_block_at_a_time_are_those_over_the_whole_tensor(monkeypatch):
    """Blocks of 7 elements against one block, on tensors of 6 x 17 with planted errors, a NaN
    and a step that is no rate: every judgment and where it points are the same."""
    from tracekit.record import roundoff

    rng = np.random.default_rng(3)
    before = rng.standard_normal((6, 17)).astype(F)
    g = rng.standard_normal((6, 17)).astype(F)
    after = (before - F(1e-3) * g).astype(F)
    planted = after.copy()
    planted[4, 9] += F(1e-4)
    planted[5, 16] += F(1e-4)  # as large: the first is named
    broken = after.copy()
    broken[2, 3] = np.nan

    def judged():
        runs = _runs(0.01, 0.0, g, before)
        squares = [{"w": (before - F(0.01 * s * s) * g).astype(F)} for s in (0.0, 1.0, 2.0)]
        slot = np.full_like(g, 0.1)
        zero, base, double = ({"s": (0.9 * slot + 0.1 * x * x).astype(F)} for x in (0 * g, g, 2 * g))
        return [compare(after, planted, before), compare(after, broken, before), compare(after, after, before),
                _is_rate("w", before, runs[1], runs[0], runs[2]), _is_rate("w", before, squares[1], squares[0],
                                                                            squares[2]),
                _role(slot, base["s"], zero, double, "not run", "s", g.shape),
                roundoff.moved(after, planted, (after,)), roundoff.moved(after, after, (after,))]

    whole = judged()
    monkeypatch.setattr(roundoff, "BLOCK", 7)
    assert judged() == whole
    assert "at [4, 9]" in whole[0][2] and whole[1][0] == float("inf") and whole[2][0] == 0.0
    assert whole[3][0] == VERIFIED and whole[4][0] == REFUTED and whole[5] == "second moment"
    assert whole[6] and not whole[7]


def test_ulps_of_float32_values_are_those_of_their_float64_magnitudes():
    from tracekit.record.roundoff import ulps_of

    rng = np.random.default_rng(7)
    a, b = (rng.standard_normal(64).astype(F) * F(10.0) ** rng.integers(-30, 30, 64).astype(F) for _ in range(2))
    a[:3], b[:3] = [np.nan, np.nan, 0.0], [np.nan, 1.0, 0.0]
    for floor in (0.0, 1e-6):
        wide = ulps_of(a.astype(np.float64), b.astype(np.float64), floor=floor, dtype=np.dtype(F))
        np.testing.assert_array_equal(ulps_of(a, b, floor=floor), wide)
        a[5] = np.inf  # the float64 way, the Inf counted as no magnitude
        np.testing.assert_array_equal(ulps_of(a, b, floor=floor), ulps_of(a.astype(np.float64), b.astype(
            np.float64), floor=floor, dtype=np.dtype(F)))
        assert ulps_of(a, b, floor=floor)[5] == ulps_of(b[5:6], floor=floor)[0]


def test_same_bits_tells_bits_not_values():
    # The audit lets the recorded array stand for a re-executed one only where their bits agree.
    from tracekit.record.rerun import same_bits
    a = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    assert same_bits(a, a.copy()) and same_bits(a, np.asfortranarray(a))
    assert not same_bits(np.float32(0.0), np.float32(-0.0))  # equal values, other bits
    assert same_bits(np.array(np.nan), np.array(np.nan)) and not same_bits(a, a.astype(np.float64))
    moved = a.copy()
    moved[2, 3] = np.nextafter(moved[2, 3], np.float32(2))
    assert not same_bits(a, moved) and not same_bits(a, a.reshape(4, 3))
