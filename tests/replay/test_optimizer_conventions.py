"""TF1 optimizers whose slots Keras names otherwise (FTRL's accum and linear, centered RMSProp's
ms, mg and mom, Adadelta's accum and accum_update, ProximalAdagrad's accumulator), recorded for
real in TF 1.15 (plain_loop.py --optimizer NAME) and replayed through ports on Keras (new and
legacy) and tf.compat.v1.train optimizers: the right one matches at the training preset, and
the usual slips are caught at their first step with their hint."""

from __future__ import annotations

import pytest

import tracekit
from tracekit.comparison.slips import OPTIMIZER_SETTING, SLOT_INITIAL
from tracekit.keys import INITIAL_STEP

from ..support.recording import record_optimizers

RECORDED = ("ftrl", "rmsprop-centered", "rmsprop-a2c", "adadelta", "proximal-adagrad")


@pytest.fixture(scope="module")
def goldens(legacy_python, tmp_path_factory):
    return record_optimizers(legacy_python, tmp_path_factory.mktemp("optimizers"), RECORDED)


# (golden, port's optimizer) -> the TF2 optimizer, as plain_loop.py's TF1 one is configured
PORTS = {
    ("ftrl", "keras"): lambda tf: tf.keras.optimizers.Ftrl(0.05, l1_regularization_strength=0.001),
    ("ftrl", "legacy"): lambda tf: tf.keras.optimizers.legacy.Ftrl(0.05, l1_regularization_strength=0.001),
    ("ftrl", "v1"): lambda tf: tf.compat.v1.train.FtrlOptimizer(0.05, l1_regularization_strength=0.001),
    ("rmsprop-centered", "v1"): lambda tf: tf.compat.v1.train.RMSPropOptimizer(0.05, momentum=0.5, centered=True),
    ("adadelta", "keras"): lambda tf: tf.keras.optimizers.Adadelta(1.0, rho=0.95, epsilon=1e-7),
    ("adadelta", "legacy"): lambda tf: tf.keras.optimizers.legacy.Adadelta(1.0, rho=0.95, epsilon=1e-7),
    ("proximal-adagrad", "v1"): lambda tf: tf.compat.v1.train.ProximalAdagradOptimizer(
        0.05, l2_regularization_strength=0.01),
}


def _compare(tf2, golden, optimizer):
    tf = tf2.tf
    model = tf.keras.Sequential([tf.keras.layers.Dense(5, activation="relu", name="hidden"),
                                 tf.keras.layers.Dense(1, name="out")])
    model.build((None, 3))

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(inputs["x:0"]) - 1.0))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}
    with tf2.replay(golden, step, model=model) as actual:
        return tracekit.compare(golden, actual, tracekit.Tolerance.training())


@pytest.mark.parametrize("golden, family", sorted(PORTS), ids=["%s-%s" % key for key in sorted(PORTS)])
def test_the_right_optimizer_matches(tf2, goldens, golden, family):
    result = _compare(tf2, goldens[golden], PORTS[golden, family](tf2.tf))
    assert result.ok and not result.missing, result.report()
    slots = [t for t in result.tensors if t.kind == "slot"]
    assert slots and all(t.steps == 6 for t in slots)  # every slot paired: compared initially and at each step


@pytest.mark.parametrize("golden, make, setting", [
    ("ftrl", lambda tf: tf.keras.optimizers.Ftrl(0.05), "l1_regularization_strength=0"),
    ("adadelta", lambda tf: tf.keras.optimizers.Adadelta(1.0, rho=0.9, epsilon=1e-7), "rho=0.9"),
    ("proximal-adagrad", lambda tf: tf.compat.v1.train.ProximalAdagradOptimizer(0.05), "l2_regularization_strength=0"),
], ids=["ftrl-l1", "adadelta-rho", "proximal-adagrad-l2"])
def test_a_setting_that_differs_is_named(tf2, goldens, golden, make, setting):
    result = _compare(tf2, goldens[golden], make(tf2.tf))
    first = result.first_divergence
    assert not result.ok and first.step == 0 and first.kind in ("var", "slot"), result.report()
    assert [h.code for h in result.slips] == [OPTIMIZER_SETTING] and setting in result.report()


def test_keras_rmsprop_starts_where_tf1_did_not(tf2, goldens):
    # TF1's RMSProp starts its mean square at 1, Keras' at 0: a port on Keras RMSprop would not
    # train like TF1 (its first steps are far larger). Caught at the initial state, with the hint.
    optimizer = tf2.tf.keras.optimizers.RMSprop(0.05, rho=0.9, momentum=0.5, epsilon=1e-10, centered=True)
    result = _compare(tf2, goldens["rmsprop-centered"], optimizer)
    first = result.first_divergence
    assert not result.ok and first.step == INITIAL_STEP and first.key.endswith("/RMSProp:0"), result.report()
    assert [h.code for h in result.slips] == [SLOT_INITIAL]


def test_keras_rmsprop_without_momentum_is_a_port_of_tf1_rmsprop(tf2, goldens):
    # TF1's RMSProp keeps a momentum slot even at momentum 0 (RMSProp_1: each step's update, fed back
    # times 0); Keras RMSprop makes none. Not demanded, and said; its rms start of 0 is still caught.
    tf = tf2.tf
    result = _compare(tf2, goldens["rmsprop-a2c"], tf.keras.optimizers.RMSprop(0.05, rho=0.99, epsilon=1e-5))
    assert_keras_rmsprop_from_zero(result, 4)


def assert_keras_rmsprop_from_zero(result, variables):
    """A Keras RMSprop port of TF1's RMSProp at momentum 0, its mean square started at 0: TF1's
    momentum slot of each of `variables` variables not compared, with why; the start caught at the
    initial state with the RMSprop hint; from the golden's state, the steps themselves match."""
    inert = [key for key in result.not_compared if key.endswith("/RMSProp_1:0")]
    assert len(inert) == variables and all("momentum slot at momentum 0" in result.not_compared[k] for k in inert)
    first = result.first_divergence
    assert first.step == INITIAL_STEP and first.key.endswith("/RMSProp:0"), result.report()
    assert [h.code for h in result.slips] == [SLOT_INITIAL]
    assert "TF1's RMSPropOptimizer starts its rms slot at 1.0, Keras', PyTorch's and optax's RMSprop at 0" in result.report()
    failed = {t.key for t in result.tensors if not t.ok}
    assert failed and all(key.endswith("/RMSProp:0") for key in failed), failed
