"""Training steps that update variables by assign ops: custom optimizers (a tf.compat.v1.train
.Optimizer subclass whose apply_gradients assigns), decoupled weight decay, gradients from
tf.gradients clipped by global norm, the global step advanced by hand. A run is a step when it
assigns a trainable variable a value computed from gradients; the gradient recorded is the one
the update reads; the optimizer state assigned in the same run is the variable's slots, paired by
dataflow. Assigns without gradients (initializers, set_weights) are not steps."""

from __future__ import annotations

import re

import numpy as np

import tracekit
from tracekit.keys import UNCLIPPED
from tracekit.report.trace import show

from ..support.recording import record_cli

B1, B2 = 0.9, 0.999  # assign_optimizer.py's AdamWeightDecay


def test_a_custom_assign_optimizer_records_gradients_and_slots(tmp_path):
    path = tmp_path / "adamw.h5"
    proc = record_cli(path, "assign_optimizer.py", "--steps", 6)
    printed = [float(v) for v in re.findall(r"^step \d+ loss (\S+)$", proc.stdout, re.M)]
    params = ["hidden/kernel:0", "hidden/bias:0", "out/kernel:0", "out/bias:0"]
    with tracekit.open(str(path)) as trace:
        assert len(trace) == 6 and trace.complete
        # each gradient as the update applied it, and as tf.clip_by_global_norm was given it
        assert sorted(trace.names("grad")) == sorted(params + [p + UNCLIPPED for p in params])
        slots = {p: [p[:-2] + "/adam_m:0", p[:-2] + "/adam_v:0"] for p in params}
        assert sorted(trace.names("slot")) == sorted(sum(slots.values(), []))
        roles = trace.meta["slots"]
        for param, (m, v) in slots.items():
            # paired by dataflow; named by what re-executing the update showed it does with the gradient
            assert roles[m] == {"var": param, "update": "assign", "arg": "adam_m", "role": "first moment"}
            assert roles[v] == {"var": param, "update": "assign", "arg": "adam_v", "role": "second moment"}
        before = trace.initial
        for k, step in enumerate(trace):
            assert round(float(step["loss/loss"]), 5) == printed[k]
            assert step.info["global_step"] == k + 1  # advanced by hand
            grads = [step["grad/" + p].astype(np.float64) for p in params]
            # the gradient the update reads: after tf.clip_by_global_norm(grads, 1.0), which these hit
            assert abs(np.sqrt(sum((g ** 2).sum() for g in grads)) - 1.0) < 1e-5
            given = [step["grad/" + p + UNCLIPPED].astype(np.float64) for p in params]
            norm = np.sqrt(sum((g ** 2).sum() for g in given))
            assert norm > 1.0 and all(np.allclose(g / norm, c, rtol=1e-4, atol=1e-7) for g, c in zip(given, grads))
            for param, grad in zip(params, grads):
                m, v = slots[param]
                np.testing.assert_allclose(step["slot/" + m], B1 * before["slot/" + m] + (1 - B1) * grad, rtol=1e-5,
                                           atol=1e-7)
                np.testing.assert_allclose(step["slot/" + v], B2 * before["slot/" + v] + (1 - B2) * grad ** 2,
                                           rtol=1e-5, atol=1e-9)
            before = {key: step[key] for key in step.keys() if key.startswith(("slot/", "var/"))}
            # the learning rate the update reads (var - lr * update): polynomial_decay(0.01, global_step, 100),
            # of the counter before or after the script's unordered increment
            assert np.isclose(step["lr/learning_rate"], [0.01 * (1 - s / 100.0) for s in (k, k + 1)], rtol=1e-5).any()
        # that increment races with the rate's read of the counter: said in the golden
        assert [(r["lr"], r["counter"]) for r in trace.meta["races"]] == [("lr/learning_rate", "global_step:0")]


def _momentum_sgd(tf, x):
    """A hand-written momentum SGD on one dense layer: (weights, velocity, train op)."""
    w = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.compat.v1.constant_initializer(0.5))
    velocity = tf.compat.v1.get_variable("w/velocity", [3, 1], trainable=False,
                                         initializer=tf.compat.v1.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
    grad, = tf.gradients(loss, [w])
    new_velocity = 0.9 * velocity + grad
    train = tf.group(velocity.assign(new_velocity), w.assign(w - 0.1 * new_velocity))
    return w, velocity, train


def test_trainable_moments_no_gradient_was_taken_of_are_slots(tmp_path):
    # Standalone Keras makes its optimizer's moments with K.variable: trainable variables the loss
    # does not read. Where the program took gradients and none of them, and an update reads them,
    # they are that update's slots, not variables updated by hand whose gradient went missing.
    path = tmp_path / "trainable_slots.h5"
    record_cli(path, "assign_optimizer.py", "--steps", 3, "--ordered", "--trainable-slots")
    params = ["hidden/kernel:0", "hidden/bias:0", "out/kernel:0", "out/bias:0"]
    with tracekit.open(str(path)) as trace:
        assert sorted(n for n in trace.names("grad") if not n.endswith(UNCLIPPED)) == sorted(params)
        roles = trace.meta["slots"]
        assert sorted(trace.names("slot")) == sorted(roles) and len(roles) == 2 * len(params)
        for param in params:
            assert roles[param[:-2] + "/adam_m:0"]["var"] == param and roles[param[:-2] + "/adam_v:0"]["var"] == param
        assert not trace.meta["warnings"], trace.meta["warnings"]
        check, = trace.meta["self_check"]
        assert check["verdict"] == "verified" and check["variables"] == len(params)


def test_assigns_without_gradients_are_not_steps(tf, graph, tmp_path):
    path = str(tmp_path / "momentum.h5")
    x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
    feed = {x: np.ones((4, 3), np.float32)}
    with tracekit.tf1.record(path) as rec:
        w, velocity, train = _momentum_sgd(tf, x)
        new_w = tf.compat.v1.placeholder(tf.float32, [3, 1])
        set_weights = w.assign(new_w)
        with tf.compat.v1.Session() as sess:
            rec.session(sess)
            sess.run(tf.compat.v1.global_variables_initializer())  # assigns from initial values
            sess.run(set_weights, {new_w: np.full((3, 1), 0.25, np.float32)})  # as Keras set_weights does
            sess.run(train, feed)
            sess.run(train, feed)
    with tracekit.open(path) as trace:
        assert len(trace) == 2
        assert trace.names("grad") == ["w:0"] and trace.names("slot") == ["w/velocity:0"]
        # the constant that scales the step (w - 0.1 * velocity), not momentum's 0.9
        assert all(np.isclose(step["lr/learning_rate"], 0.1) for step in trace)
        assert trace.meta["slots"]["w/velocity:0"]["var"] == "w:0"
        assert (trace.initial["var/w:0"] == 0.25).all()  # the state the first step started from
        assert trace.meta["warnings"] == []


def test_a_graph_built_before_recording_still_steps_and_says_what_it_missed(tf, graph, tmp_path):
    path = str(tmp_path / "before.h5")
    x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
    w, velocity, train = _momentum_sgd(tf, x)  # tf.gradients ran before the recorder: not seen
    with tracekit.tf1.record(path) as rec:
        with tf.compat.v1.Session() as sess:
            rec.session(sess)
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(train, {x: np.ones((4, 3), np.float32)})
    with tracekit.open(path) as trace:
        assert len(trace) == 1 and trace.names("slot") == ["w/velocity:0"]  # paired by dataflow alone
        assert trace.names("grad") == []
        assert any("gradient of w:0" in w and "build the graph inside the recorder" in w
                   for w in trace.meta["warnings"])


def test_a_step_the_graph_does_not_show_is_declared(tmp_path):
    # A gradient written out by hand: no optimizer, no tf.gradients. The recorder cannot tell it
    # trains, says how to declare it, and records it once declared.
    unseen = record_cli(tmp_path / "unseen.h5", "manual_gradient.py", check=False)
    assert unseen.returncode != 0 and "--train-op NAME --gradient VAR=TENSOR" in unseen.stderr
    path = tmp_path / "declared.h5"
    record_cli(path, "manual_gradient.py", train_op="train", gradient="w:0=grad_w:0", loss="mse",
               learning_rate="rate")
    with tracekit.open(str(path)) as trace:
        assert len(trace) == 4 and trace.names("grad") == ["w:0"] and trace.meta["warnings"] == []
        assert trace.meta["declared"]["gradients"] == {"w:0": "grad_w:0"}
        assert "declared  train ops train; loss mse;" in show(trace)
        before = trace.initial["var/w:0"].astype(np.float64)
        for step in trace:
            x, y = step["input/x:0"].astype(np.float64), step["input/y:0"].astype(np.float64)
            error = x @ before - y
            np.testing.assert_allclose(step["grad/w:0"], 2.0 / 8 * x.T @ error, rtol=1e-5, atol=1e-6)
            assert np.isclose(step["loss/loss"], np.mean(error ** 2), rtol=1e-5)
            assert np.isclose(step["lr/learning_rate"], 0.1)
            before = step["var/w:0"].astype(np.float64)


def test_a_declared_name_the_graph_lacks_is_a_warning(tf, graph, tmp_path):
    path = str(tmp_path / "typo.h5")
    x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
    with tracekit.tf1.record(path, learning_rate="no_such_rate") as rec:
        w, _, train = _momentum_sgd(tf, x)
        with tf.compat.v1.Session() as sess:
            rec.session(sess)
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(train, {x: np.ones((4, 3), np.float32)})
    with tracekit.open(path) as trace:
        assert any("declared 'no_such_rate' is not in the recorded graph" in w for w in trace.meta["warnings"])
