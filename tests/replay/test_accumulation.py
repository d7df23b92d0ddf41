"""A TF1 step made of several runs (gradients accumulated over micro-batches: reset, N additions,
apply; or tf.compat.v1.ConditionalAccumulator's apply_grad and take_grad), recorded for real in TF
1.15 (accumulate.py), replayed against TF2 ports written the way
TF2 code accumulates: a loop over the micro-batches inside one step, their gradients added up and
applied once. Such a port matches at the default tolerance with no var_map of TF1's accumulator
variables; a port that applies each micro-batch's gradients is caught at step 0, with a hint
naming accumulation."""

from __future__ import annotations

import os

import pytest

from tracekit.comparison.slips import ACCUMULATION
from tracekit.keys import MICRO

from ..support import ROOT, run_python
from ..support.recording import SCRIPTS

pytestmark = pytest.mark.modern
STEPS = 3
CASES = {"adam-mean-clip": ["--micro", "3", "--form", "mean", "--clip", "--dropout"],
         "momentum-sum": ["--micro", "2", "--form", "sum", "--optimizer", "momentum"],
         "conditional-accumulator": ["--micro", "3", "--conditional"]}  # take_grad: the mean


@pytest.fixture(scope="module", params=sorted(CASES))
def golden(request, legacy_python, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("accumulate") / ("%s.h5" % request.param))
    run_python(legacy_python, ["-m", "tracekit", "record", "-o", path, "--", os.path.join(SCRIPTS, "accumulate.py"),
                               "--steps", str(STEPS)] + CASES[request.param], cwd=ROOT)
    return request.param, path


def port(tf, case, per_micro=False, mean_loss=False):
    """accumulate.py in TF2: Keras layers, its optimizer, and a step that loops over the micro-batches
    (the inputs' first axis), adds their gradients up and applies them once (`per_micro`: applies
    each micro-batch's gradients instead, the slip; `mean_loss`: returns their losses' mean)."""
    args = CASES[case]
    micro = int(args[args.index("--micro") + 1])
    mean, clip, dropout = "mean" in args or "--conditional" in args, "--clip" in args, "--dropout" in args
    layers = [tf.keras.layers.Dense(5, activation="tanh", name="hidden")]
    layers += [tf.keras.layers.Dropout(0.25)] if dropout else []
    model = tf.keras.Sequential(layers + [tf.keras.layers.Dense(1, name="out")], name="net")
    model.build((None, 3))
    optimizer = tf.keras.optimizers.Adam(0.01, epsilon=1e-8) if "momentum" not in args else \
        tf.keras.optimizers.SGD(0.05, momentum=0.9)

    @tf.function
    def step(inputs):
        xs, ys = inputs["x:0"], inputs["y:0"]
        total = [tf.zeros_like(v) for v in model.trainable_variables]
        losses = []
        for i in range(micro):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(xs[i], training=True) - ys[i]))
            grads = tape.gradient(loss, model.trainable_variables)
            if per_micro:
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
            total = [t + g for t, g in zip(total, grads)]
            losses.append(loss)
        if not per_micro:
            applied = [t / micro for t in total] if mean else total
            if clip:
                applied, _ = tf.clip_by_global_norm(applied, 0.05)
            optimizer.apply_gradients(zip(applied, model.trainable_variables))
        return {"loss": tf.reduce_mean(tf.stack(losses)) if mean_loss else tf.stack(losses)}
    return model, step


def test_a_port_that_accumulates_in_its_step_matches(tf2, golden):
    import tensorflow as tf

    case, path = golden
    model, step = port(tf, case)
    result = tf2.check(path, step, model=model)
    result.assert_ok()
    compared = {t.key for t in result.tensors}
    assert {"input/x:0", "loss/loss", "grad/net/hidden/kernel:0", "grad/net/hidden/kernel:0" + MICRO} <= compared
    accumulators = [key for key, why in result.not_compared.items() if "accumulator of micro-batches" in why]
    assert accumulators  # TF1's accumulator variables: left out without a var_map, and said why


def test_a_port_that_applies_each_micro_batch_is_caught_at_step_0(tf2, golden):
    import tensorflow as tf

    case, path = golden
    model, step = port(tf, case, per_micro=True)
    result = tf2.check(path, step, model=model)
    assert not result.ok and result.first_divergence.step == 0
    hint, = [h for h in result.slips if h.code == ACCUMULATION]
    micro = int(CASES[case][CASES[case].index("--micro") + 1])
    assert hint.evidence["micro_batches"] == micro and hint.evidence["applies"] == micro
    assert "hint: gradient accumulation" in result.report()


def test_a_port_that_returns_one_loss_is_told_to_return_each_micro_batchs(tf2, golden):
    import tensorflow as tf

    from tracekit.comparison.slips import MICRO_LOSSES

    case, path = golden
    model, step = port(tf, case, mean_loss=True)
    result = tf2.check(path, step, model=model)
    assert not result.ok and result.first_divergence.key == "loss/loss"
    hint, = [h for h in result.slips if h.code == MICRO_LOSSES]
    assert "tf.stack(losses)" in result.report()


@pytest.fixture(scope="module")
def averaged(legacy_python, tmp_path_factory):
    """The case Keras 3's accumulation has the form of: the micro-batches' mean, unclipped."""
    path = str(tmp_path_factory.mktemp("accumulate") / "averaged.h5")
    run_python(legacy_python, ["-m", "tracekit", "record", "-o", path, "--", os.path.join(SCRIPTS, "accumulate.py"),
                               "--steps", str(STEPS), "--micro", "3", "--form", "mean"], cwd=ROOT)
    return path


def test_a_keras_3_port_whose_optimizer_accumulates_matches(tf2, averaged):
    # Keras 3's optimizer accumulates itself (gradient_accumulation_steps=N): the port applies each
    # micro-batch's gradients and the optimizer updates on every Nth call, with their mean. Its step
    # count is its calls // N, loaded and read as such; the gradient it applied is the calls' mean.
    import keras
    import tensorflow as tf

    path, micro = averaged, 3
    model = keras.Sequential([keras.layers.Dense(5, activation="tanh", name="hidden"),
                              keras.layers.Dense(1, name="out")], name="net")
    model.build((None, 3))
    optimizer = keras.optimizers.Adam(0.01, epsilon=1e-8, gradient_accumulation_steps=micro)

    @tf.function
    def step(inputs):
        losses = []
        for i in range(micro):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(inputs["x:0"][i]) - inputs["y:0"][i]))
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            losses.append(loss)
        return {"loss": tf.stack(losses)}
    result = tf2.check(path, step, model=model)
    result.assert_ok()
    assert {"grad/net/hidden/kernel:0", "var/net/hidden/kernel:0", "slot/net/hidden/kernel/Adam:0"} <= \
        {t.key for t in result.tensors}
