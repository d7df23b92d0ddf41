"""A slip in one part of the loss named from the scalar taps both sides take of its parts
(comparison/loss_terms.py), where the golden holds no recorded parts: the port's loss minus
TF1's is one weight times one tap at every step from the golden's state. Generated losses
a x pg + b x vf + c x entropy, a port that weighs one tap otherwise from step 0: that tap is named
with its weight; a correct port, one forced too few steps, and one wrong by noise are not."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tracekit
from tracekit.comparison.loss_terms import LOSS_TAP

from ..support import build_golden

TAPS = ("pg", "vf", "entropy")
COEFFICIENTS = (1.0, 0.25, -0.01)


def _traces(tmp_path, seed, steps, slipped=None, factor=1.0, noise=0.0, forcing="state"):
    rs = np.random.RandomState(seed)
    values = [{name: np.float32(rs.uniform(0.1, 3.0)) for name in TAPS} for _ in range(steps)]

    def loss(taps, weights):
        return np.float32(sum(np.float64(w) * np.float64(taps[n]) for n, w in zip(TAPS, weights)))

    def trace(path, weights, jitter, meta):
        return build_golden(str(tmp_path / path), ({"loss/loss": np.float32(loss(v, weights) + jitter(k)),
                                                    **{"tap/" + n: v[n] for n in TAPS}}
                                                   for k, v in enumerate(values)), meta=meta)
    ported = [c * (factor if n == slipped else 1.0) for n, c in zip(TAPS, COEFFICIENTS)]
    golden = trace("golden.h5", COEFFICIENTS, lambda k: 0.0, None)
    actual = trace("actual.h5", ported, lambda k: noise * rs.uniform(-1, 1), {"replay": {"forcing": forcing}})
    return golden, actual


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2 ** 16), st.integers(4, 10), st.sampled_from(TAPS), st.sampled_from([-1.0, 0.0, 2.0, 0.5, 3.0]))
def test_the_tap_a_port_weighs_otherwise_is_named(tmp_path_factory, seed, steps, slipped, factor):
    golden, actual = _traces(tmp_path_factory.mktemp("t"), seed, steps, slipped, factor)
    result = tracekit.compare(golden, actual)
    assert not result.ok and result.first_divergence.key == "loss/loss", result.report()
    found, = result.fingerprints
    coefficient = COEFFICIENTS[TAPS.index(slipped)]
    assert (found.code, found.detail["tap"], found.detail["steps"]) == (LOSS_TAP, slipped, steps)
    assert abs(found.port - (factor - 1.0) * coefficient) <= 1e-3 * abs(coefficient), found
    assert "the tap %r" % slipped in result.report()


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2 ** 16), st.integers(4, 10))
def test_a_correct_port_and_noise_get_no_name(tmp_path_factory, seed, steps):
    golden, actual = _traces(tmp_path_factory.mktemp("t"), seed, steps)
    assert tracekit.compare(golden, actual).fingerprints == []
    golden, actual = _traces(tmp_path_factory.mktemp("n"), seed, steps, noise=0.05)
    result = tracekit.compare(golden, actual)
    assert not result.ok and result.fingerprints == [], result.report()


def test_too_few_steps_from_the_golden_state_name_nothing(tmp_path):
    # one step fits any tap: unforced, only step 0 started from the golden's state
    golden, actual = _traces(tmp_path, 3, 6, "vf", 2.0, forcing="none")
    result = tracekit.compare(golden, actual)
    assert not result.ok and result.fingerprints == [], result.report()
