"""Hand-written optimizers, written as public TF1 code writes them, recorded and audited by
re-executing their updates, their claims held to a truth computed without tracekit:

- an Adafactor (a tf.compat.v1.train.Optimizer subclass: second moments factored into row and
  column means for matrices, square and not, a full one for vectors, update clipping, a rate
  from a schedule of the step counter, and the tiny addend `rate + 1e-30 * mean(g^2)` that keeps
  an XLA rewriter from fusing across variables), and again with a warmup from a rate of 0 and a
  bias at 0, whose first step is the addend's alone;
- a LAMB (an apply_gradients of assign ops: Adam's moments, decoupled weight decay, a per-layer
  trust ratio ||w|| / ||update||);
- an RMSProp whose step is scaled by `rate + 1e-30 * mean(g^2)` (the same tiny addend in
  another optimizer's arithmetic), and one with the rate plainly.

In each: every variable and slot after every step equals numpy's rule on the recorded state and
gradient; the audit agrees by re-execution for every variable; the learning rate recorded is the
schedule's at every step, or none is claimed and the golden says why (never the 1e-30); each
slot's role is what it is. A golden whose recorded step of one variable is 1.5 times its update's
fails the audit, naming the variable and the step."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tracekit.record import state as state_module

STEPS = 3
EPS1, CLIP, DECAY_POW = 1e-30, 1.0, -0.8
B1, B2, EPS, WD = 0.9, 0.999, 1e-6, 0.01
SHAPES = {"square": [4, 4], "wide": [4, 6], "bias": [6]}


def schedule(step, name=""):
    """The rate at a step counter's value: 0.05 / sqrt(max(step + 1, 2)); with a warmup, times
    min(1, step / 2): 0 at the first step, as tensor2tensor's schedules start."""
    rate = 0.05 / np.sqrt(max(step + 1.0, 2.0))
    return rate * min(1.0, step / 2.0) if name in WARMUP else rate


def build(tf, name):
    v1 = tf.compat.v1
    x = v1.placeholder(tf.float32, [5, 4], name="x")
    init = v1.random_normal_initializer(stddev=0.5, seed=3)
    with v1.variable_scope("m", use_resource=False):
        square = v1.get_variable("square", SHAPES["square"], initializer=init)
        wide = v1.get_variable("wide", SHAPES["wide"], initializer=init)
        # at 0, where a warmup's first step moves it by the addend's 1e-30 times its rate only
        bias = v1.get_variable("bias", SHAPES["bias"], initializer=v1.zeros_initializer() if name in WARMUP else init)
    loss = tf.reduce_mean(tf.square(tf.matmul(tf.tanh(tf.matmul(x, square)), wide) + bias - 0.5))
    step = v1.train.get_or_create_global_step()
    counter = tf.cast(step, tf.float32)
    rate = 0.05 * tf.math.rsqrt(tf.maximum(counter + 1.0, 2.0))
    if name in WARMUP:
        rate *= tf.minimum(1.0, counter / 2.0)
    params = [square, wide, bias]
    if name.startswith("adafactor"):
        train = _adafactor(tf)(rate).minimize(loss, global_step=step)
    else:
        grads = tf.gradients(loss, params)
        updates = [u for g, p in zip(grads, params) for u in _assigns(tf, name, rate, g, p)]
        with tf.control_dependencies(updates):
            train = step.assign_add(1)
    return x, loss, train, params


def _adafactor(tf):
    v1 = tf.compat.v1

    class Adafactor(v1.train.Optimizer):
        def __init__(self, rate):
            super(Adafactor, self).__init__(False, "Adafactor")
            self.rate = rate

        def _create_slots(self, var_list):
            for var in var_list:
                shape = var.get_shape().as_list()
                if len(shape) >= 2:
                    self._get_or_make_slot(var, tf.zeros(shape[:-1]), "vr", self._name)
                    self._get_or_make_slot(var, tf.zeros(shape[:-2] + shape[-1:]), "vc", self._name)
                else:
                    self._zeros_slot(var, "v", self._name)

        def _apply_dense(self, grad, var):
            squared = tf.square(grad) + EPS1
            mean = tf.reduce_mean(squared)
            counter = tf.cast(v1.train.get_global_step(), tf.float32) + 1.0
            decay = 1.0 - tf.pow(counter, DECAY_POW)
            scale = self.rate
            decay += mean * 1e-30  # keeps a rewriter from fusing across variables
            scale += mean * 1e-30
            assigns = []
            if len(var.shape) >= 2:
                vr, vc = self.get_slot(var, "vr"), self.get_slot(var, "vc")
                new_vr = decay * vr + (1.0 - decay) * tf.reduce_mean(squared, -1)
                new_vc = decay * vc + (1.0 - decay) * tf.reduce_mean(squared, -2)
                assigns += [v1.assign(vr, new_vr), v1.assign(vc, new_vc)]
                row = tf.math.rsqrt(new_vr / tf.reduce_mean(new_vr, -1, keepdims=True))
                x = grad * tf.expand_dims(row, -1) * tf.expand_dims(tf.math.rsqrt(new_vc), -2)
            else:
                v = self.get_slot(var, "v")
                new_v = decay * v + (1.0 - decay) * squared
                assigns.append(v1.assign(v, new_v))
                x = grad * tf.math.rsqrt(new_v)
            x /= tf.maximum(1.0, tf.sqrt(tf.reduce_mean(tf.square(x))) / CLIP)
            return tf.group(v1.assign(var, var - scale * x), *assigns)

    return Adafactor


def _assigns(tf, name, rate, grad, param):
    v1 = tf.compat.v1
    base = param.op.name
    zeros = v1.zeros_initializer()
    if name == "lamb":
        m = v1.get_variable(base + "/lamb_m", param.shape, initializer=zeros, trainable=False)
        v = v1.get_variable(base + "/lamb_v", param.shape, initializer=zeros, trainable=False)
        next_m = B1 * m + (1.0 - B1) * grad
        next_v = B2 * v + (1.0 - B2) * tf.square(grad)
        update = next_m / (tf.sqrt(next_v) + EPS) + WD * param
        w_norm, u_norm = tf.norm(param), tf.norm(update)
        trust = tf.where(tf.greater(w_norm, 0.0), tf.where(tf.greater(u_norm, 0.0), w_norm / u_norm, 1.0), 1.0)
        return [param.assign(param - rate * trust * update), m.assign(next_m), v.assign(next_v)]
    ms = v1.get_variable(base + "/rms", param.shape, initializer=v1.ones_initializer(), trainable=False)
    next_ms = 0.9 * ms + 0.1 * tf.square(grad)
    scale = rate + tf.reduce_mean(tf.square(grad)) * 1e-30 if name == "rmsprop_addend" else rate
    return [param.assign(param - scale * grad / tf.sqrt(next_ms + 1e-10)), ms.assign(next_ms)]


def numpy_step(name, var, slots, g, counter):
    """The variable and its slots after the step (float64), `counter` the global step before it."""
    lr = schedule(counter, name)
    if name.startswith("adafactor"):
        squared = g * g + EPS1
        decay = 1.0 - (counter + 1.0) ** DECAY_POW
        if var.ndim >= 2:
            vr = decay * slots["vr"] + (1 - decay) * squared.mean(-1)
            vc = decay * slots["vc"] + (1 - decay) * squared.mean(-2)
            x = g / np.sqrt(vr / vr.mean(-1, keepdims=True))[..., None] / np.sqrt(vc)[..., None, :]
            new_slots = {"vr": vr, "vc": vc}
        else:
            v = decay * slots["v"] + (1 - decay) * squared
            x, new_slots = g / np.sqrt(v), {"v": v}
        x = x / max(1.0, np.sqrt(np.mean(x * x)) / CLIP)
        return var - lr * x, new_slots
    if name == "lamb":
        m = B1 * slots["lamb_m"] + (1 - B1) * g
        v = B2 * slots["lamb_v"] + (1 - B2) * g * g
        update = m / (np.sqrt(v) + EPS) + WD * var
        trust = np.linalg.norm(var) / np.linalg.norm(update)
        return var - lr * trust * update, {"lamb_m": m, "lamb_v": v}
    ms = 0.9 * slots["rms"] + 0.1 * g * g
    return var - lr * g / np.sqrt(ms + 1e-10), {"rms": ms}


# What each slot is (a truth of the construction): slot suffix -> its role.
ROLES = {"adafactor": {"square": {"Adafactor": "second moment, factored: rows",
                                  "Adafactor_1": "second moment, factored: columns"},
                       "wide": {"Adafactor": "second moment, factored: rows",
                                "Adafactor_1": "second moment, factored: columns"},
                       "bias": {"Adafactor": "second moment"}},
         "lamb": {"*": {"lamb_m": "first moment", "lamb_v": "second moment"}},
         "rmsprop": {"*": {"rms": "second moment"}},
         "rmsprop_addend": {"*": {"rms": "second moment"}}}
ROLES["adafactor_warmup"] = ROLES["adafactor"]
NAMES = tuple(ROLES)
WARMUP = ("adafactor_warmup",)  # a rate of 0 at the first step
ADDEND = ("adafactor", "adafactor_warmup", "rmsprop_addend")  # the optimizers whose step reads `rate + 1e-30 * mean(g^2)`


def record(tf, path, name, plant=None):
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        with tracekit.tf1.record(path) as rec:
            x, loss, train, params = build(tf, name)
            with v1.Session() as sess:
                rec.session(sess)
                sess.run(v1.global_variables_initializer())
                rng = np.random.RandomState(0)
                for _ in range(STEPS):
                    sess.run([loss, train], {x: rng.randn(5, 4).astype(np.float32)})
    return [p.name for p in params]


# Adafactor's slots are named after the optimizer (Adafactor, Adafactor_1): what numpy_step calls them.
RULE_NAMES = {"Adafactor": "vr", "Adafactor_1": "vc"}


def slots_of(meta, var, vector=False):
    """{a slot's argument (as numpy_step names it, where `vector` a vector's): its name}."""
    out = {}
    for slot, fact in meta["slots"].items():
        if fact["var"] == var:
            arg = fact["arg"]
            out["v" if vector and arg == "Adafactor" else RULE_NAMES.get(arg, arg)] = slot
    return out


@pytest.mark.parametrize("name", NAMES)
def test_a_hand_written_update_is_audited_and_its_claims_verified(tf, tmp_path, name):
    path = str(tmp_path / (name + ".h5"))
    params = record(tf, path, name)
    with tracekit.open(path) as trace:
        meta = trace.meta
        assert [c["verdict"] for c in meta["self_check"]] == ["verified"], meta["self_check"]
        for k, step in enumerate(trace):
            before = trace.state_before(k)
            for var in params:
                slots = slots_of(meta, var, vector=before["var/" + var].ndim == 1)
                new, new_slots = numpy_step(name, before["var/" + var].astype(np.float64),
                                            {s: before["slot/" + n].astype(np.float64) for s, n in slots.items()},
                                            step["grad/" + var].astype(np.float64), k)
                np.testing.assert_allclose(step["var/" + var], new, rtol=1e-5, atol=1e-7, err_msg="%s %d" % (var, k))
                for s, n in slots.items():
                    np.testing.assert_allclose(step["slot/" + n], new_slots[s], rtol=1e-4, atol=1e-9,
                                               err_msg="slot %s of %s after step %d" % (s, var, k))
            # the rate: the schedule's at every step, or none claimed, and never the tiny addend
            rates = [step[key] for key in step.keys() if key.startswith("lr/")]
            assert all(float(r) == pytest.approx(schedule(k, name), rel=1e-6, abs=1e-12) for r in rates), (k, rates)
        assert trace.names("lr") == ["learning_rate"]
        for var in params:
            fact = meta["updates"][var]
            assert fact["lr_check"]["verdict"] == "verified", fact
            if name in ADDEND:  # the scalar nearest the assign, the addend's 1e-30, refuted; the rate found
                assert fact["lr_check"]["detail"].startswith("found by re-execution: the scalar first taken"), fact
            assert fact["gradient_check"]["verdict"] == "verified", fact
            truth = ROLES[name].get(var.split("/")[-1].split(":")[0]) or ROLES[name]["*"]
            assert {meta["slots"][n]["arg"]: meta["slots"][n]["role"] for n in slots_of(meta, var).values()} == truth
        audit = {v["var"]: v for v in meta["audit"]["variables"]}
        assert sorted(audit) == sorted(params)
        assert all(v["verdict"] == "agrees" and v["by"] == "re-execution" for v in audit.values()), audit
    verified = tracekit.store.audit_trace(tracekit.open(path))
    assert verified.ok and {v.verdict for v in verified.variables} == {"agrees"}, verified


@pytest.mark.parametrize("name", NAMES)
def test_a_planted_wrong_step_fails_the_audit(tf, tmp_path, monkeypatch, name):
    # The state the recorder reads after step 1 holds the first variable moved 1.5 times as far as
    # its update moved it: a golden whose step is not what its update computes.
    reads = []
    original = state_module.RecordedState.read

    def planted(self, sess, run):
        got = original(self, sess, run)
        reads.append(got)
        if len(reads) == 3:  # the initial read, after step 0, after step 1
            previous = dict((key, value) for key, _, value in reads[-2])
            got = [(key, var, previous[key] + 1.5 * (value - previous[key]) if key == "var/m/square:0" else value)
                   for key, var, value in got]
        return got

    monkeypatch.setattr(state_module.RecordedState, "read", planted)
    path = str(tmp_path / (name + ".h5"))
    record(tf, path, name)
    with tracekit.open(path) as trace:
        audit = {v["var"]: v for v in trace.meta["audit"]["variables"]}
    assert audit["m/square:0"]["verdict"] == "disagrees" and audit["m/square:0"]["step"] == 1, audit["m/square:0"]
    assert "var/m/square:0" in audit["m/square:0"]["detail"]
    assert all(v["verdict"] == "agrees" for var, v in audit.items() if var != "m/square:0"), audit


@pytest.mark.parametrize("name", NAMES)
def test_what_each_update_reads_is_what_a_walk_from_it_finds(tf, tmp_path, monkeypatch, name):
    # dataflow.Above answers which gradients an update's new value reads from its inputs'
    # answers, once per op; walking up from each update (as a graph with a loop still is) is the
    # definition. Both recordings must find the same updates, gradients, rates and slots.
    from tracekit.record import dataflow

    record(tf, str(tmp_path / "memo.h5"), name)
    monkeypatch.setattr(dataflow.Above, "__call__",
                        lambda self, op: frozenset(dataflow.upstream(op, self._derived) & self._targets))
    record(tf, str(tmp_path / "walk.h5"), name)
    with tracekit.open(str(tmp_path / "memo.h5")) as memo, tracekit.open(str(tmp_path / "walk.h5")) as walk:
        assert memo.meta["updates"] and memo.meta["updates"] == walk.meta["updates"]
        assert memo.meta["slots"] == walk.meta["slots"]
