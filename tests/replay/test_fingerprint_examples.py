"""Slip fingerprints on the shipped example goldens: each wrong port of tests/replay/test_ports.py
replayed from the golden's state at every step. A slip of the update is named with its
parameter and both sides' source lines; a slip the update does not show (the loss, the rate,
the draws, an activation) gets no name from the update, and the correct ports none at all."""

from __future__ import annotations

import pytest

import tracekit
from tools.ports import estimator_model, seed_example

from ..support import golden
from .test_ports import WRONG

NAMED = {  # the wrong port -> the fingerprint codes its update shows at its first divergence
    "Keras Adam epsilon 1e-7 (TF1: 1e-8)": ["epsilon"],
    "batch-norm momentum 0.99 (TF1: 0.9)": ["average-rate"],
}


@pytest.mark.parametrize("case", list(WRONG))
def test_each_wrong_example_port_is_named_for_its_slip_only(tf2, case):
    name, make, options, replay_options, (step, kind, tensor) = WRONG[case]
    model, step_fn = make(**options)
    result = tf2.check(golden(name), step_fn, model=model, steps=3, forcing="state", **replay_options)
    first = result.first_divergence
    assert not result.ok and (first.step, first.kind, first.name) == (step, kind, tensor), result.report()
    assert sorted(f.code for f in result.fingerprints) == NAMED.get(case, []), result.report()
    for found in result.fingerprints:
        lines = result.sources[found.keys[0]]
        assert lines.tf1 and lines.port, result.report()  # the example goldens keep TF1's lines
    if case.startswith("Keras Adam epsilon"):
        found, = result.fingerprints
        assert found.golden == pytest.approx(1e-8) and found.port == pytest.approx(1e-7), result.report()
    # the hint that guesses at the same slip from the first tensor is not said beside its verified fit
    assert not (result.fingerprints and (result.conventions or result.slips)), result.report()
    if case.startswith("batch-norm momentum"):
        found, = result.fingerprints
        assert found.port == pytest.approx(0.1, rel=1e-3) and set(found.keys) == {"var/bn/moving_mean:0", "var/bn/moving_variance:0"}
        assert "not a learning rate" in result.report()


@pytest.mark.parametrize("name, make", [("estimator_model", estimator_model.make), ("seed_example", seed_example.make)])
def test_the_correct_example_ports_get_no_name(tf2, name, make):
    model, step_fn = make()
    result = tf2.check(golden(name), step_fn, model=model, steps=3, forcing="state",
                       tolerance=tracekit.Tolerance.training())
    assert result.fingerprints == [], result.report()
