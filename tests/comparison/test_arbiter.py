"""The arbiter's judgment and its evidence, without TensorFlow: which layers' decisions flipped
between two runs and how near the kink, and the verdict from the float32 and float64 ports'
statistics."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tracekit.comparison.arbiter import (EPS32, EXPLAINED, KINK_ULPS, PORT, Arbitrated, arbiter_tolerance, judge,
                                         selection_flips, step_stats, undecided, zero_flips)
from tracekit.comparison.stats import compare_values


def _stats(golden, actual):
    tol = arbiter_tolerance().resolve("grad", "w:0", 3, "float32")
    return compare_values(np.asarray(golden, np.float32), np.asarray(actual), tol)


def test_a_relu_that_flipped_is_found_with_its_margin():
    out32 = np.array([[0.0, 1.0], [0.5, 0.0]], np.float32)
    out64 = np.array([[3 * EPS32, 1.0], [0.5, 0.0]])
    flip = zero_flips("layer dense", out32, out64)
    assert (flip.kind, flip.elements, flip.total, flip.where) == ("zero", 1, 4, ((0, 0),))
    assert abs(flip.margin_ulps - 3.0) < 1e-9  # 3 eps against the layer's scale of 1
    assert "1 of 4 elements zero in one precision only, 3 ulps from the kink" in flip.describe()


def test_no_flip_without_zeros_or_where_the_zeros_agree():
    assert zero_flips("linear", np.ones((2, 2)), np.ones((2, 2)) + 1e-9) is None
    assert zero_flips("relu", np.array([0.0, 2.0]), np.array([0.0, 2.0 + 1e-12])) is None
    assert zero_flips("shape", np.zeros(2), np.zeros(3)) is None


@settings(max_examples=200, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 40), elements=st.sampled_from([0.0, 1e-7, 0.5, 1.0, -0.25])),
       hnp.arrays(np.float64, st.integers(1, 40), elements=st.sampled_from([0.0, 1e-7, 0.5, 1.0, -0.25])))
def test_flips_are_exactly_the_elements_zero_on_one_side(a, b):
    b = np.resize(b, a.shape)
    flip = zero_flips("layer", a, b)
    flipped = (a == 0) != (b == 0)
    if flip is None:
        assert not flipped.any() or not ((a == 0).any() or (b == 0).any())
        return
    assert flip.elements == int(flipped.sum()) and flip.total == a.size
    assert all(flipped[i] for i in flip.where) and flip.margin_ulps > 0


def test_a_max_pool_that_chose_another_element():
    # One window of two: float32 chose element 0, float64 element 1, which is larger by 2 eps.
    x64 = np.array([1.0, 1.0 + 2 * EPS32])
    route32, route64 = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    at64 = np.array([1.0 + 2 * EPS32, 0.0])  # float64's maximum, routed where float32 chose
    flip = selection_flips("layer pool", route32, route64, at64, x64)
    assert (flip.kind, flip.elements, flip.where) == ("selection", 1, ((0,),))
    assert abs(flip.margin_ulps - 2.0 / (1 + 2 * EPS32)) < 1e-6
    assert selection_flips("layer pool", route32, route32, at64, x64) is None


def test_the_float64_port_agreeing_explains_the_step():
    golden = np.array([1.0, 2.0, 3.0], np.float32)
    port32 = golden + np.array([0.0, 0.5, 0.0], np.float32)  # one element through the other side
    failing = {"grad/w:0": _stats(golden, port32)}
    verdict = judge(7, failing, {"grad/w:0": _stats(golden, golden.astype(np.float64) + 1e-9)}, (), 0.5)
    assert verdict.verdict == EXPLAINED and verdict.side == "port" and verdict.explained
    assert "step 7: round-off through a discontinuity (the port's float32" in verdict.describe()
    disagreeing = judge(7, failing, {"grad/w:0": _stats(golden, port32.astype(np.float64))}, (), 0.5)
    assert disagreeing.verdict == PORT and "the port's error" in disagreeing.describe()


def test_the_golden_crossing_needs_a_near_flip_at_its_tap_and_every_forward_value_agreeing():
    golden = np.array([1.0, 2.0], np.float32)
    failing = {"grad/w:0": _stats(golden, golden + 1)}
    float64 = {"grad/w:0": _stats(golden, golden + 1.0), "tap/h": _stats(golden, golden + 0.0)}
    near = zero_flips("golden tap h", np.array([0.0, 1.0]), np.array([EPS32, 1.0]))
    far = zero_flips("golden tap h", np.array([0.0, 1.0]), np.array([2 * KINK_ULPS * EPS32, 1.0]))
    assert judge(3, failing, float64, (), 0.1, (near,)).side == "golden"
    assert judge(3, failing, float64, (), 0.1, (far,)).verdict == PORT  # too far from the kink to be round-off
    forward_off = dict(float64, **{"loss/loss": _stats(golden, golden + 1.0)})
    assert judge(3, failing, forward_off, (), 0.1, (near,)).verdict == PORT
    assert judge(3, failing, float64, (), 0.1, ()).verdict == PORT  # nothing tapped: nothing shows it


def test_the_record_is_plain_data():
    arbitrated = Arbitrated()
    golden = np.array([1.0], np.float32)
    flip = zero_flips("layer d", np.array([0.0, 1.0]), np.array([EPS32, 1.0]))
    arbitrated.steps.append(judge(2, {"grad/w:0": _stats(golden, golden + 1)}, {"grad/w:0": _stats(golden, golden)},
                                  (flip,), 1.5))
    arbitrated.steps.append(undecided(9, "TypeError: float32 expected", 0.25))
    assert arbitrated.seconds == 1.75 and [a.step for a in arbitrated.explained] == [2]
    data = json.loads(json.dumps(arbitrated.to_dict(), allow_nan=False))
    assert data["steps"][0]["flips"][0]["where"] == [[0]] and data["steps"][1]["verdict"] == "undecided"


def test_a_failure_the_noise_analysis_explains_counts_as_agreeing():
    from tracekit.comparison.result import TensorResult
    from tracekit.comparison.noise import GRADIENT, Noise

    failed = _stats(np.array([1.0], np.float32), np.array([2.0]))
    noisy, real = TensorResult("grad", "b:0"), TensorResult("grad", "w:0")
    noisy.add(0, failed, Noise(0, "grad/b:0", GRADIENT, "grad/b:0"), accept=True)
    real.add(0, failed)

    class Result:
        tensors = [noisy, real]
    stats = step_stats(Result(), 0)
    assert stats["grad/b:0"].ok and not stats["grad/w:0"].ok and not failed.ok  # a copy: the original stays
