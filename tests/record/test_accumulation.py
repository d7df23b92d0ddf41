"""Training steps made of several runs: gradients accumulated over micro-batches. The generated
family (N = 1 to 4 micro-batch runs, summed or averaged, Adam or Momentum, clipped by global norm
or not) is recorded with no option and held to a numpy truth: each step holds every micro-batch's
inputs, loss and gradients along a first axis, the gradient its update applied, and the
variables after it; the golden says how the applied gradient is made of the micro-batches', and
which variables accumulate. The program's own form (reset, N additions, apply) is
tests/record/scripts/accumulate.py."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

import tracekit
from tracekit.keys import MICRO, UNCLIPPED
from tracekit.report.trace import show

from ..support.recording import record_cli

STEPS, BATCH, CLIP = 3, 4, 0.05
PARAMS = ["net/hidden/kernel:0", "net/hidden/bias:0", "net/out/kernel:0", "net/out/bias:0"]


def record(tf, path, micro, form, optimizer, clip):
    """The accumulating program, built and run inside the recorder (the API)."""
    v1 = tf.compat.v1
    rng = np.random.RandomState(micro)
    with tf.Graph().as_default():
        with tracekit.tf1.record(path) as rec:
            x = v1.placeholder(tf.float32, [BATCH, 3], name="x")
            y = v1.placeholder(tf.float32, [BATCH, 1], name="y")
            with v1.variable_scope("net"):
                h = v1.layers.dense(x, 5, activation=tf.tanh, name="hidden",
                                    kernel_initializer=v1.glorot_uniform_initializer(seed=1))
                out = v1.layers.dense(h, 1, name="out", kernel_initializer=v1.glorot_uniform_initializer(seed=2))
            loss = tf.reduce_mean(tf.square(out - y))
            params = v1.trainable_variables()
            opt = v1.train.AdamOptimizer(0.01) if optimizer == "adam" else v1.train.MomentumOptimizer(0.05, 0.9)
            accum = [v1.Variable(tf.zeros(p.shape), trainable=False) for p in params]
            reset = tf.group([a.assign(tf.zeros_like(a)) for a in accum])
            compute = tf.group([a.assign_add(g) for a, (g, _) in zip(accum, opt.compute_gradients(loss, params))])
            applied = [a / float(micro) if form == "mean" else a.read_value() for a in accum]
            if clip:
                applied, _ = tf.clip_by_global_norm(applied, CLIP)
            train = opt.apply_gradients(zip(applied, params), global_step=v1.train.get_or_create_global_step())
            with v1.Session() as sess:
                rec.session(sess)
                sess.run(v1.global_variables_initializer())
                for _ in range(STEPS):
                    sess.run(reset)
                    for _ in range(micro):
                        sess.run(compute, {x: rng.randn(BATCH, 3), y: rng.randn(BATCH, 1)})
                    sess.run(train)


def forward(state, x, y):
    """numpy: the loss of one micro-batch and its gradients."""
    w1, b1, w2, b2 = (state[p].astype(np.float64) for p in PARAMS)
    h = np.tanh(x @ w1 + b1)
    out = h @ w2 + b2
    d = 2.0 * (out - y) / out.size
    dh = (d @ w2.T) * (1 - h ** 2)
    return float(np.mean((out - y) ** 2)), [x.T @ dh, dh.sum(0), h.T @ d, d.sum(0)]


def update(optimizer, state, slots, grads, t):
    """numpy: the optimizer's step from `state` (its variables) and `slots` (by name: "m", "v", "accum")."""
    new, out = {}, {}
    for p, g in zip(PARAMS, grads):
        w = state[p].astype(np.float64)
        if optimizer == "adam":
            m = 0.9 * slots[p]["m"] + 0.1 * g
            v = 0.999 * slots[p]["v"] + 0.001 * g * g
            new[p] = w - 0.01 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-8)
            out[p] = {"m": m, "v": v}
        else:
            accum = 0.9 * slots[p]["accum"] + g
            new[p] = w - 0.05 * accum
            out[p] = {"accum": accum}
    return new, out


FAMILY = list(itertools.product([1, 2, 3, 4], ["sum", "mean"], ["adam", "momentum"], [False, True]))


@pytest.mark.parametrize("micro,form,optimizer,clip", FAMILY,
                         ids=["%d-%s-%s%s" % (n, f, o, "-clip" if c else "") for n, f, o, c in FAMILY])
def test_an_accumulated_step_records_every_micro_batch_true(tf, tmp_path, micro, form, optimizer, clip):
    path = str(tmp_path / "accumulated.h5")
    record(tf, path, micro, form, optimizer, clip)
    slot_args = ("m", "v") if optimizer == "adam" else ("accum",)
    with tracekit.open(path) as trace:
        assert len(trace) == STEPS
        meta = trace.meta
        accumulation = meta["accumulation"]
        assert accumulation["micro_batches"] == micro and sorted(accumulation["accumulators"].values()) == \
            sorted(PARAMS)
        assert accumulation["form"] == {p: form if micro > 1 else "sum" for p in PARAMS}  # one: the same
        assert sorted(accumulation["state"]) == sorted(accumulation["accumulators"])
        assert not meta["warnings"], meta["warnings"]
        assert [c["verdict"] for c in meta["self_check"]] == ["verified"]
        held, = meta["held"].values()
        assert held["input"] == 2 and held["loss"] == 1 and held["grad"] == 4
        slot_of = {(s["var"], s["arg"]): name for name, s in meta["slots"].items()}
        slots = {p: {a: trace.initial["slot/" + slot_of[(p, a)]].astype(np.float64) for a in slot_args}
                 for p in PARAMS}
        for k, step in enumerate(trace):
            assert step.info["micro_batches"] == micro
            state = {p: trace.state_before(k)["var/" + p] for p in PARAMS}
            xs, ys = step["input/x:0"], step["input/y:0"]
            assert xs.shape == (micro, BATCH, 3) and ys.shape == (micro, BATCH, 1)
            losses, grads = zip(*(forward(state, xs[i].astype(np.float64), ys[i].astype(np.float64))
                                  for i in range(micro)))
            np.testing.assert_allclose(step["loss/loss"], losses, rtol=1e-5)
            for j, p in enumerate(PARAMS):
                np.testing.assert_allclose(step["grad/" + p + MICRO], [g[j] for g in grads], rtol=1e-4, atol=1e-7)
            total = [sum(g[j] for g in grads) / (micro if form == "mean" else 1) for j in range(len(PARAMS))]
            applied = total
            if clip:
                norm = np.sqrt(sum(np.sum(g ** 2) for g in total))
                applied = [g * CLIP / max(norm, CLIP) for g in total]
                for p, g in zip(PARAMS, total):
                    np.testing.assert_allclose(step["grad/" + p + UNCLIPPED], g, rtol=1e-4, atol=1e-7)
            for p, g in zip(PARAMS, applied):
                np.testing.assert_allclose(step["grad/" + p], g, rtol=1e-4, atol=1e-7)
            new, slots = update(optimizer, state, slots, applied, k + 1)
            for p in PARAMS:
                np.testing.assert_allclose(step["var/" + p], new[p], rtol=1e-4, atol=1e-7)
                for a in slot_args:
                    np.testing.assert_allclose(step["slot/" + slot_of[(p, a)]], slots[p][a], rtol=1e-4, atol=1e-7)
        audit = {v["var"]: v["verdict"] for v in meta["audit"]["variables"]}
        assert audit == {p: "agrees" for p in PARAMS}, meta["audit"]
        assert "each applies the gradients of %d micro-batch runs (%s)" % (
            micro, "summed" if form == "sum" or micro == 1 else "averaged") in show(trace)


def test_the_public_form_records_zero_code_with_its_draws(tmp_path):
    # the program as a script (reset, N additions, apply returning the mean loss), dropout in each
    # micro-batch: recorded with no option, the draws of each micro-batch along the first axis
    path = tmp_path / "accumulate.h5"
    proc = record_cli(path, "accumulate.py", "--micro", 3, "--form", "mean", "--dropout", "--steps", 2)
    printed = [float(v) for v in re.findall(r"^step \d+ loss (\S+)$", proc.stdout, re.M)]
    with tracekit.open(str(path)) as trace:
        assert len(trace) == 2 and not trace.meta["warnings"]
        for k, step in enumerate(trace):
            assert step["random/net/dropout/random_uniform/RandomUniform:0"].shape == (3, 4, 5)
            assert step["loss/loss"].shape == (3,)
            # the program's own mean of the losses its micro-batches added up
            assert float(np.mean(step["loss/loss"])) == pytest.approx(printed[k], rel=1e-6)
        # the loss totals the micro-batch runs also add to accumulate, with no counterpart in a port
        assert len(trace.meta["accumulation"]["state"]) == 6


def test_conditional_accumulators_make_a_step_of_several_runs_too(tmp_path):
    # tf.compat.v1.ConditionalAccumulator: each micro-batch run's apply_grad adds its gradients, the
    # apply run's take_grad returns their mean to apply_gradients; nothing is zeroed by a run of its own
    path = tmp_path / "conditional.h5"
    proc = record_cli(path, "accumulate.py", "--conditional", "--micro", 3, "--steps", 2)
    printed = [float(v) for v in re.findall(r"^step \d+ loss (\S+)$", proc.stdout, re.M)]
    with tracekit.open(str(path)) as trace:
        assert len(trace) == 2 and not trace.meta["warnings"], trace.meta["warnings"]
        accumulation = trace.meta["accumulation"]
        assert accumulation["micro_batches"] == 3 and set(accumulation["form"].values()) == {"mean"}
        assert sorted(accumulation["accumulators"].values()) == sorted(PARAMS)
        for k, step in enumerate(trace):
            assert step["input/x:0"].shape == (3, BATCH, 3) and step["loss/loss"].shape == (3,)
            assert float(np.mean(step["loss/loss"])) == pytest.approx(printed[k], rel=1e-6)
            for p in PARAMS:  # the gradient applied is the mean of the micro-batches'
                np.testing.assert_allclose(step["grad/" + p], step["grad/" + p + MICRO].mean(axis=0), rtol=1e-5,
                                           atol=1e-7)
        check, = trace.meta["self_check"]
        assert check["verdict"] == "verified"
        assert all(v["verdict"] == "agrees" for v in trace.meta["audit"]["variables"])
