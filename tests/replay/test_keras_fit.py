"""A TF1 Keras model trained with model.fit (goldens/keras_fit.h5, recorded on TF 1.15.5 by
the zero-code launcher) replayed through the port's own compiled training step
(tracekit.tf2.keras_train_step): the step's loss is the batch's, not the epoch's running mean."""

from __future__ import annotations

import pytest

import tracekit
from tools.ports import keras_fit

from ..support import golden


@pytest.mark.tracekit(tolerance="training")
def test_a_compiled_keras_model_replays_a_fit_golden(tracekit_replay):
    model, step = keras_fit.make()
    result = tracekit_replay("keras_fit", step, model=model)  # fails with the first divergence unless it matches
    actual = tracekit_replay.actual
    # The dense bias before batch norm has a round-off gradient that Adam amplifies: the
    # default tolerance fails on it and says why; the training preset accepts it, listed.
    strict = tracekit.compare(golden("keras_fit"), actual)
    # The golden's bias gradient is round-off and the port's is within twice its floor, on any
    # machine; at which step the amplified noise first exceeds the tolerance is the machine's
    # (step 0 where the golden was recorded).
    assert strict.tensor("var", "hidden/bias:0").driven_by_noise, strict.report()
    first = strict.first_divergence
    assert not strict.ok and (first.key, first.noise.link) == ("var/hidden/bias:0", "driven"), strict.report()
    assert "not a porting error" in strict.report()
    assert result.profile.name == "training" and result.steps == 16
    assert {n.key for n in result.noise} <= {"var/hidden/bias:0", "var/bn/moving_mean:0"}
    kinds = {t.kind for t in result.tensors}
    assert {"input", "random", "loss", "lr", "grad", "var", "slot"} <= kinds
    assert result.tensor("loss", "loss").steps == 16 and result.tensor("var", "bn/moving_mean:0").steps == 17
    # Everything but the noise matches at the default tolerance, all 16 steps.
    assert all(t.ok for t in strict.tensors if t.key not in {n.key for n in strict.noise}), strict.report()


def test_the_running_mean_train_step_returns_is_not_the_loss(tf2):
    # What a user gets returning train_step's own result: Keras' "loss" metric is the mean
    # over the epoch so far, equal to the batch loss only at an epoch's first step.
    model, _ = keras_fit.make()

    def naive(inputs):
        return model.train_step((inputs["hidden_input:0"], inputs["logits_target:0"]))
    actual = tf2.replay(golden("keras_fit"), naive, model=model, steps=3)
    first = tracekit.compare(golden("keras_fit"), actual).first_divergence
    assert (first.step, first.key) == (1, "loss/loss")


@pytest.mark.parametrize("options, expected", [
    ({"epsilon": 1e-8}, (0, "var/hidden/kernel:0")),  # TF 1.15's tf.keras Adam used 1e-7
    ({"bn_momentum": 0.9}, (0, "var/bn/moving_mean:0")),  # TF 1.15's Keras BatchNormalization: 0.99
    ({"bn_momentum": 0.999}, (0, "var/bn/moving_mean:0")),  # slim's 0.997 and friends: close, still caught
    ({"dropout": 0.5}, (0, "loss/loss")),  # the same draws, another keep threshold
])
@pytest.mark.parametrize("preset", ["default", "training"])
def test_wrong_fit_ports_are_caught_where_they_depart(tf2, options, expected, preset):
    # Accepting the bias's explained noise hides none of them; without accepting it, the
    # first divergence is still the unexplained one.
    model, step = keras_fit.make(**options)
    actual = tf2.replay(golden("keras_fit"), step, model=model, steps=3)
    result = tracekit.compare(golden("keras_fit"), actual,
                              tracekit.Tolerance.training() if preset == "training" else None)
    first = result.first_divergence
    assert not result.ok and (first.step, first.key, first.noise) == expected + (None,), result.report()


def test_keras_train_step_needs_a_compiled_model(tf2):
    model, _ = keras_fit.make()
    model.optimizer = None
    with pytest.raises(tracekit.UsageError, match="compiled Keras model"):
        tf2.keras_train_step(model)
