"""The migration guide's Estimator shape with MomentumOptimizer and a learning rate that halves
every 5 steps (goldens/momentum_model.h5, recorded on TF 1.15.5). TF1's momentum rule kept in
TF2 (tf.compat.v1.train.MomentumOptimizer) passes; the guide's Keras SGD(momentum=...) mapping
departs where the rate first changes, and the report says why."""

from __future__ import annotations

import pytest

import tracekit
from tools.ports import momentum_model
from tracekit.comparison.conventions import MOMENTUM

from ..support import golden

GOLDEN = golden("momentum_model")


def test_tf1_momentum_in_tf2_matches_through_every_learning_rate_change(tracekit_replay):
    model, step = momentum_model.make()
    result = tracekit_replay("momentum_model", step, model=model)  # the default tolerance
    assert result.profile.name == "default" and result.steps == 20
    compared = {t.key for t in result.tensors}
    assert {"lr/learning_rate", "grad/hidden/kernel:0", "slot/hidden/kernel/Momentum:0", "var/global_step:0"} <= compared
    assert not result.conventions


def test_the_guides_keras_sgd_mapping_departs_when_the_rate_changes_and_the_report_says_why(tf2):
    model, step = momentum_model.make("keras")
    result = tracekit.compare(GOLDEN, tf2.replay(GOLDEN, step, model=model))
    first = result.first_divergence
    assert (first.step, first.key) == (5, "var/hidden/kernel:0"), result.report()
    (hint,) = result.conventions
    assert hint.code == MOMENTUM and hint.lr_change == (5, pytest.approx(0.05), pytest.approx(0.025))
    report = result.report()
    assert report.index("possible cause: the momentum convention") < report.index("failing tensors")
    # While the rate is constant the two conventions are the same state: the first 5 steps pass.
    model, step = momentum_model.make("keras")
    assert tracekit.compare(GOLDEN, tf2.replay(GOLDEN, step, model=model, steps=5)).ok


@pytest.mark.parametrize("options, expected", [
    ({"momentum": 0.95}, (1, "var/hidden/kernel:0")),  # the first step has no accumulated momentum yet
    ({"decay_steps": 10}, (5, "lr/learning_rate")),
    ({"nesterov": True}, (0, "var/hidden/kernel:0")),
])
def test_wrong_momentum_ports_are_caught_where_they_depart(tf2, options, expected):
    model, step = momentum_model.make(**options)
    result = tracekit.compare(GOLDEN, tf2.replay(GOLDEN, step, model=model, steps=6))
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == expected, result.report()
    assert not result.conventions  # nothing here is the convention difference


def test_a_tf1_optimizer_without_a_step_counter_leaves_only_the_counter_uncompared(tf2):
    model, step = momentum_model.make(count_steps=False)
    result = tracekit.compare(GOLDEN, tf2.replay(GOLDEN, step, model=model, steps=3))
    assert result.ok, result.report()
    assert "global_step=" in result.not_compared["var/global_step:0"]
