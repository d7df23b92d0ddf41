"""With init='golden' the replay loads the golden's optimizer state into the port's optimizer at
its first update; what the port's optimizer made on its own is the replay's initial state of those
slots, compared with the golden's. A port that would start elsewhere (Keras Adagrad with
initial_accumulator_value=0.0 where TF1's AdagradOptimizer starts at 0.1) fails at the initial
state with a hint, instead of passing on the golden's state. A real TF 1.15 recording."""

from __future__ import annotations

import os
import shutil

import pytest

import tracekit
from tracekit.keys import INITIAL_STEP
from tracekit.lifecycle.update import write_golden
from tracekit.lifecycle.workspace import Workspace

from ..support import ROOT, run_python
from ..support.recording import SCRIPTS


@pytest.fixture(scope="module")
def adagrad_golden(legacy_python, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("adagrad") / "adagrad.h5")
    run_python(legacy_python, ["-m", "tracekit", "record", "-o", path, "--", os.path.join(SCRIPTS, "plain_loop.py"),
                               "--steps", "5", "--optimizer", "adagrad", "--dropout", "0"], cwd=ROOT)
    return path


def _port(tf, initial_accumulator_value):
    """plain_loop.py's model and loss in Keras, trained by Keras' Adagrad."""
    model = tf.keras.Sequential([tf.keras.layers.Dense(5, activation="relu", name="hidden"),
                                 tf.keras.layers.Dense(1, name="out")])
    model.build((None, 3))
    optimizer = tf.keras.optimizers.Adagrad(0.05, initial_accumulator_value=initial_accumulator_value)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(inputs["x:0"]) - 1.0))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}
    return model, step


def test_the_ports_own_initial_slots_are_compared(tf2, adagrad_golden):
    with tracekit.open(adagrad_golden) as golden:
        slots = sorted(golden.names("slot"))
        assert len(slots) == 4 and all((golden.initial["slot/" + s] == golden.initial["slot/" + slots[0]].flat[0])
                                       .all() for s in slots)
    model, step = _port(tf2.tf, 0.1)  # TF1's default
    with tf2.replay(adagrad_golden, step, model=model) as actual:
        assert sorted(k for k in actual.initial if k.startswith("slot/")) == ["slot/" + s for s in slots]
        result = tracekit.compare(adagrad_golden, actual, tracekit.Tolerance.training())
        assert result.ok, result.report()
    model, step = _port(tf2.tf, 0.0)  # Keras' Adagrad allows 0: it would not train like TF1
    with tf2.replay(adagrad_golden, step, model=model) as actual:
        result = tracekit.compare(adagrad_golden, actual, tracekit.Tolerance.training())
    first = result.first_divergence
    assert not result.ok and first.step == INITIAL_STEP and first.kind == "slot", result.report()
    assert [h.code for h in result.slips] == ["slot-initial-value"]
    assert "starts %s at 0 where the TF1 optimizer started it at 0.1 everywhere" % first.key in result.report()
    # the steps themselves ran from the golden's state, as init='golden' says
    assert all(t.ok for t in result.tensors if t.kind in ("loss", "grad", "var"))


def test_an_update_keeps_the_initial_state_its_steps_started_from(tf2, adagrad_golden, tmp_path, monkeypatch):
    # The trace holds the port's own initial slots (0.0), its steps started from the golden's (0.1):
    # a golden made from it must say 0.1, or a replay of it would start elsewhere than its steps did.
    monkeypatch.delenv("CI", raising=False)
    path = str(tmp_path / "adagrad.h5")
    shutil.copyfile(adagrad_golden, path)
    model, step = _port(tf2.tf, 0.0)
    with tf2.replay(path, step, model=model) as actual:
        assert all((actual.initial[k] == 0).all() for k in actual.initial if k.startswith("slot/"))
        written = write_golden(actual, path, Workspace(str(tmp_path)), by="test", reason="accepted")
    with tracekit.open(adagrad_golden) as legacy, tracekit.open(path) as updated:
        slots = [k for k in legacy.initial if k.startswith("slot/")]
        assert sorted(written.provenance.last.initial_kept) == sorted(slots)
        for key in slots:
            assert updated.initial[key].tobytes() == legacy.initial[key].tobytes(), key
