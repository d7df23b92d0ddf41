"""tracekit.tf2.derive: a TF2 run on given data, recorded as a replay records, is what a
derived golden is made of; the same port replays it exactly (dropout included), a changed
port departs from it."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tracekit.errors import UsageError
from tracekit.lifecycle.update import write_golden
from tracekit.lifecycle.workspace import Workspace


def make(tf, lr=1e-2, noise=0.0):
    tf.keras.utils.set_random_seed(3)
    inputs = tf.keras.Input((5,))
    hidden = tf.keras.layers.Dense(8, activation="relu", name="hidden")(inputs)
    hidden = tf.keras.layers.Dropout(0.3)(hidden)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(3, name="out")(hidden))
    optimizer = tf.keras.optimizers.Adam(lr)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(inputs):
        x = inputs["x"]
        if noise:  # a random draw with a mean and stddev: recorded as the standard draw it maps
            x = x + tf.random.normal(tf.shape(x), mean=2.0, stddev=noise)
        with tf.GradientTape() as tape:
            loss = loss_fn(inputs["y"], tracekit.tap("logits", model(x, training=True)))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}
    return model, step


def data(steps=4):
    rng = np.random.RandomState(0)
    return [{"x": rng.randn(6, 5).astype(np.float32), "y": rng.randint(0, 3, 6)} for _ in range(steps)]


@pytest.fixture
def derived(tf2, tmp_path, monkeypatch):
    monkeypatch.delenv("CI", raising=False)  # goldens are never written in CI; this one is a test's own
    model, step = make(tf2.tf, noise=0.5)
    actual = tf2.derive(step, data(), model=model)
    golden = str(tmp_path / "goldens" / "toy.h5")
    write_golden(actual, golden, Workspace(str(tmp_path)), by="test")
    return golden


def test_a_run_on_data_records_what_a_replay_records(tf2):
    model, step = make(tf2.tf, noise=0.5)
    with tf2.derive(step, data(), model=model) as actual:
        assert len(actual) == 4 and actual.meta["replay"]["source"] == "data"
        assert actual.meta["replay"]["golden"] is None and actual.meta["replay"]["random"] == "none"
        kinds = {t.kind for t in actual.catalog}
        assert {"input", "random", "tap", "loss", "lr", "grad", "var"} <= kinds
        assert actual.names("var") == ["hidden/kernel:0", "hidden/bias:0", "out/kernel:0", "out/bias:0"]
        draws = actual.step(0).names("random")
        assert len(draws) == 2  # the normal noise, then dropout's uniform mask
        normal = actual.step(0)["random", draws[0]]
        assert abs(float(normal.mean())) < 0.5 and 0.6 < float(normal.std()) < 1.4  # standard, not mean 2


def test_the_same_port_replays_its_derived_golden_exactly(tf2, derived):
    model, step = make(tf2.tf, noise=0.5)
    result = tracekit.compare(derived, tf2.replay(derived, step, model=model))
    assert result.profile.name == "exact" and result.ok, result.report()
    assert {t.kind for t in result.tensors} >= {"random", "tap", "grad", "var"}


def test_a_changed_port_departs_from_its_derived_golden(tf2, derived):
    model, step = make(tf2.tf, lr=2e-2, noise=0.5)
    result = tracekit.compare(derived, tf2.replay(derived, step, model=model))
    assert not result.ok and (result.first_divergence.step, result.first_divergence.kind) == (0, "lr")


def test_bad_data_is_refused(tf2):
    model, step = make(tf2.tf)
    with pytest.raises(UsageError, match="no data"):
        tf2.derive(step, [], model=model)
    with pytest.raises(UsageError, match=r"data\[1\] is a list"):
        tf2.derive(step, [data(1)[0], [1, 2]], model=model)
    v = tf2.tf.Variable(1.0, name="same")
    with pytest.raises(UsageError, match="several TF2 variables are named same:0"):
        tf2.derive(step, data(1), variables=[v, tf2.tf.Variable(2.0, name="same")])


def test_the_former_name_still_derives_and_warns(tf2):
    model, step = make(tf2.tf)
    with pytest.warns(DeprecationWarning, match=r"tracekit\.tf2\.record is now tracekit\.tf2\.derive"):
        with tf2.record(step, data(1), model=model) as actual:
            assert len(actual) == 1 and actual.meta["replay"]["source"] == "data"
