"""The golden checks its own claims when it is written: the loss recorded is the tensor whose
gradients the step took (composite losses of every shape, the graph built before or inside the
recorder), every variable the step updates has its gradient (embeddings read by tf.gather,
whose gradient a hand-written update reads converted to a dense tensor), reads the step's own
updates may overtake are found and recomputed, and the state each step started from is what it
read, runs between steps included. Each truth here is computed without tracekit: the program's
own printed totals, or a separate pass from the recorded state with no train op."""

from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import tracekit
from tracekit.errors import RecordError
from tracekit.keys import BEFORE
from tracekit.report.trace import show
from tracekit.store import audit_trace
from tracekit.store.audit_result import NOT_APPLIED

from ..support import run_python
from ..support.recording import SCRIPTS, record_cli


def _printed(proc):
    return [float(v) for v in re.findall(r"^step \d+ loss (\S+)$", proc.stdout, re.M)]


# ---- the loss: a generated family of shapes ------------------------------------------------------

# Leaves: parts of a loss over one small model; shapes: how programs put them together.
LEAVES = ("ce", "l2", "ent", "vf")
SHAPES = st.recursive(
    st.sampled_from(LEAVES),
    lambda inner: st.one_of(
        st.tuples(st.just("add"), inner, inner), st.tuples(st.just("sub"), inner, inner),
        st.tuples(st.just("scale"), st.sampled_from([0.5, 2.0, -0.01]), inner),
        st.tuples(st.just("add_n"), st.lists(inner, min_size=2, max_size=3)),
        st.tuples(st.just("towers"), st.sampled_from([2, 4]), inner),  # a loss divided by a tower count
        st.tuples(st.just("mean_of_sum"), inner, inner),  # tf.reduce_mean(tf.stack([a, b]))
        st.tuples(st.just("stop"), inner, inner)),  # a + tf.stop_gradient(b)
    max_leaves=4)


def _build(tf, shape, x, y, w, v):
    h = tf.matmul(x, w)
    leaves = {
        "ce": lambda: tf.reduce_mean(tf.compat.v1.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=h)),
        "l2": lambda: 1e-2 * tf.nn.l2_loss(w),
        "ent": lambda: tf.reduce_mean(tf.square(tf.nn.softmax(h))),
        "vf": lambda: tf.reduce_mean(tf.square(tf.matmul(x, v) - 1.0)),
    }
    if isinstance(shape, str):
        return leaves[shape]()
    op = shape[0]
    if op == "add":
        return _build(tf, shape[1], x, y, w, v) + _build(tf, shape[2], x, y, w, v)
    if op == "sub":
        return tf.subtract(_build(tf, shape[1], x, y, w, v), _build(tf, shape[2], x, y, w, v))
    if op == "scale":
        return shape[1] * _build(tf, shape[2], x, y, w, v)
    if op == "add_n":
        return tf.add_n([_build(tf, s, x, y, w, v) for s in shape[1]])
    if op == "towers":
        return _build(tf, shape[2], x, y, w, v) / float(shape[1])
    if op == "mean_of_sum":
        return tf.reduce_mean(tf.stack([_build(tf, shape[1], x, y, w, v), _build(tf, shape[2], x, y, w, v)]))
    return _build(tf, shape[1], x, y, w, v) + tf.stop_gradient(_build(tf, shape[2], x, y, w, v))


def _has(shape, op):
    if isinstance(shape, str):
        return False
    if isinstance(shape, list):
        return any(_has(s, op) for s in shape)
    return shape[0] == op or any(_has(s, op) for s in shape[1:] if not isinstance(s, (int, float)))


def _uses(shape, leaf):
    if isinstance(shape, str):
        return shape == leaf
    if isinstance(shape, list):  # add_n's terms
        return any(_uses(s, leaf) for s in shape)
    return any(_uses(s, leaf) for s in shape[1:] if not isinstance(s, (int, float)))


def _record_loss(tf, path, shape, how, inside):
    """Record 3 steps of a model whose loss has `shape`; the program's own totals."""
    graph = tf.Graph()
    totals = []
    with graph.as_default():
        def model():
            x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
            y = tf.compat.v1.placeholder(tf.float32, [4, 2], name="y")
            init = tf.compat.v1.glorot_uniform_initializer(seed=3)
            w = tf.compat.v1.get_variable("w", [3, 2], initializer=init)
            v = tf.compat.v1.get_variable("v", [3, 1], initializer=init)
            total = _build(tf, shape, x, y, w, v)
            params = [p for p, leaf in ((w, None), (v, "vf")) if leaf is None or _uses(shape, leaf)]
            opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)
            if how == "minimize":
                train = opt.minimize(total, var_list=params)
            else:
                grads = tf.gradients(total, params)
                train = opt.apply_gradients([(g, p) for g, p in zip(grads, params) if g is not None])
            return x, y, total, train

        if not inside:  # built before recording started: nothing intercepted, the loss inferred
            x, y, total, train = model()
        with tracekit.tf1.record(path) as rec:
            if inside:
                x, y, total, train = model()
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                for k in range(3):
                    rng = np.random.RandomState(k)
                    feed = {x: rng.randn(4, 3), y: np.eye(2)[rng.randint(0, 2, 4)]}
                    # a run of its own, before the step: fetched with the train op, a total whose forward
                    # pass the gradients do not need may read the weights after their update (a race)
                    totals.append(sess.run(total, feed))
                    sess.run(train, feed)
    return totals


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(shape=SHAPES, how=st.sampled_from(["minimize", "tf.gradients"]), inside=st.booleans())
# found by the search: Grappler hoists w out of the L2 terms' sum on the update's path, the fetched sum reads w late
@example(shape=("mean_of_sum", ("scale", 2.0, "l2"), ("add_n", ["vf", "l2"])), how="tf.gradients", inside=False)
@example(shape=("mean_of_sum", ("scale", 2.0, "l2"), ("add_n", ["vf", "l2"])), how="tf.gradients", inside=True)
def test_the_loss_recorded_is_the_one_differentiated_whatever_its_shape(tf, tmp_path_factory, shape, how, inside):
    if not inside:
        # Built before recording, the loss is inferred from the gradient graph, which holds nothing of
        # an addend without gradient: a total with a stop_gradient addend is recorded as its other part,
        # whose gradients are the same (docs/RECORDING.md). The family without it is held to its truth.
        assume(not _has(shape, "stop"))
    if not any(_uses(shape, leaf) for leaf in ("ce", "l2", "ent")) or shape[0:1] == ("stop",) and \
            not any(_uses(shape[1], leaf) for leaf in ("ce", "l2", "ent")):
        shape = ("add", "ce", shape)  # w must get a gradient: the step updates it
    path = str(tmp_path_factory.mktemp("loss") / "shape.h5")
    totals = _record_loss(tf, path, shape, how, inside)
    with tracekit.open(path) as trace:
        recorded = [float(step["loss/loss"]) for step in trace]
        np.testing.assert_allclose(recorded, totals, rtol=1e-6, atol=1e-7, err_msg=repr(shape))
        check, = trace.meta["self_check"]
        assert check["verdict"] in ("verified", "replaced", "unverified"), check  # a faithful program never fails
        losses, = trace.meta["losses"].values()  # one kind of step
        assert losses["loss/loss"]["tensor"] == check["tensor"]
        # The audit tells the truth: an update it calls faithful is one (var = before - lr * grad), and one
        # it calls off is off. TF1's Grappler may rewrite the path a gradient takes to its update (hoisting a
        # factor out of a sum of L2 terms) and keep the fetched node beside it, off that path: read after the
        # update, the recorded gradient is then not the one applied, and the audit and self-check say so.
        audited = {v["var"]: v["verdict"] for v in trace.meta["audit"]["variables"]}
        for var, verdict in audited.items():
            ulps = max(_update_ulps(trace, k, var) for k in range(min(3, len(trace))))  # the steps audited
            assert verdict == "disagrees" if ulps > 16 else verdict == "agrees" if ulps < 1 else True, \
                (var, verdict, ulps, shape)


def _update_ulps(trace, k, var):
    """How far step k's gradient-descent update of `var` is from before - lr * grad, in float32 ulps
    of each element's terms (numpy in float64, apart from tracekit's audit)."""
    before, step = trace.state_before(k)["var/" + var].astype(np.float64), trace.step(k)
    moved = float(step["lr/learning_rate"]) * step["grad/" + var].astype(np.float64)
    scale = np.finfo(np.float32).eps * (np.abs(before) + np.abs(moved)) + 1e-45
    return float(np.max(np.abs(before - moved - step["var/" + var]) / scale))


def test_an_addend_taken_for_the_loss_is_replaced_by_the_sum_and_said(tf, graph, tmp_path):
    # the user names an addend (what a gradient graph's first seed consumer suggests): the check
    # finds the sum the step differentiated, records it at every step and says so
    path = str(tmp_path / "addend.h5")
    x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
    w = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.compat.v1.ones_initializer())
    part = tf.subtract(tf.reduce_mean(tf.matmul(x, w)), 1.0, name="part")
    total = tf.add(part, tf.reduce_sum(tf.square(w)), name="total")
    train = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(total)
    totals = []
    with tracekit.tf1.record(path, loss="part:0") as rec:
        with tf.compat.v1.Session() as sess:
            rec.session(sess)
            sess.run(tf.compat.v1.global_variables_initializer())
            for k in range(3):
                feed = {x: np.full((4, 3), k + 1.0)}
                totals.append(sess.run(total, feed))  # before the step (see _record_loss)
                sess.run(train, feed)
    with tracekit.open(path) as trace:
        assert [float(s["loss/loss"]) for s in trace] == pytest.approx(totals, rel=1e-6)
        check, = trace.meta["self_check"]
        assert (check["verdict"], check["original"], check["tensor"]) == ("replaced", "part:0", "total:0")
        assert "loss      loss/loss is graph tensor total:0 (found by the self-check)" in show(trace)
        assert any("part:0, is not what the step differentiated; total:0 is" in w for w in trace.meta["warnings"])


def test_gradients_of_no_candidate_fail_the_recording_naming_what_was_tried(tf, graph, tmp_path):
    # a differentiation seeded with grad_ys=3: no tensor of the graph has those gradients, so the
    # recorder cannot name the loss; it stops, and says what to do, rather than write a lie
    path = str(tmp_path / "seeded.h5")
    x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
    w = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.compat.v1.ones_initializer())
    with pytest.raises(RecordError) as caught:
        with tracekit.tf1.record(path) as rec:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w)), name="mse")
            grad, = tf.gradients(loss, [w], grad_ys=tf.constant(3.0))
            train = tf.compat.v1.train.GradientDescentOptimizer(0.01).apply_gradients([(grad, w)])
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                sess.run(train, {x: np.ones((4, 3), np.float32)})
    message = str(caught.value)
    assert "mse:0" in message and "--loss" in message and "not those of" in message
    with tracekit.open(path) as trace:
        assert trace.meta["self_check"][0]["verdict"] == "failed"


# ---- every gradient, the slots ---------------------------------------------------------------------

def test_a_gathered_embedding_has_its_gradient_and_slots_under_a_hand_written_update(tmp_path):
    path = tmp_path / "embedding.h5"
    proc = record_cli(path, "embedding_adamw.py", "--steps", 3)
    params = ["embeddings/word_embeddings:0", "embeddings/LayerNorm/gamma:0", "output_weights:0", "output_bias:0"]
    with tracekit.open(str(path)) as trace:
        assert [float(s["loss/loss"]) for s in trace] == pytest.approx(_printed(proc), abs=2e-7)
        assert sorted(n for n in trace.names("grad") if not n.endswith("@unclipped")) == sorted(params)
        for param in params:  # m and v are slots of every parameter, the embedding's included
            for slot in ("adam_m", "adam_v"):
                assert trace.meta["slots"][param[:-2] + "/" + slot + ":0"]["var"] == param
        assert not any("gradient of" in w for w in trace.meta["warnings"])
        assert trace.meta["self_check"][0]["verdict"] == "verified"
        assert trace.meta["self_check"][0]["variables"] == 4
        # the embedding's gradient is the clipped rows summed by id, zero elsewhere
        first = trace.step(0)
        ids = first["input/ids:0"].reshape(-1)
        grad = first["grad/embeddings/word_embeddings:0"]
        assert grad.shape == (40, 8) and not grad[np.setdiff1d(np.arange(40), ids)].any()
        assert np.abs(grad[np.unique(ids)]).sum() > 0


# ---- races and the state a step started from ----------------------------------------------------------

def _loss_from(tf, state, inputs, build):
    """A separate pass, no train op: the loss of `build` at `state` for `inputs`."""
    graph = tf.Graph()
    with graph.as_default():
        loss, feeds = build()
        with tf.compat.v1.Session() as sess:
            for variable in tf.compat.v1.global_variables():
                variable.load(state["var/" + variable.name], sess)
            return float(sess.run(loss, {graph.get_tensor_by_name(name): value for name, value in inputs.items()
                                         if name in feeds}))


@pytest.mark.tf1  # a race of TF 1.15's ref variables: a resource variable's read is a copy, ordered here
def test_a_loss_read_unordered_with_its_update_is_reported_and_recorded_from_the_state_before(tf, tmp_path):
    path = tmp_path / "ungated.h5"
    record_cli(path, "ungated_l2.py", "--steps", 5)

    def build():
        x = tf.compat.v1.placeholder(tf.float32, [16, 8], name="x")
        y = tf.compat.v1.placeholder(tf.int32, [16], name="y")
        hidden = tf.compat.v1.layers.dense(x, 32, tf.nn.relu, name="hidden")
        logits = tf.compat.v1.layers.dense(hidden, 4, name="logits")
        data = tf.reduce_mean(tf.compat.v1.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        kernels = [v for v in tf.compat.v1.trainable_variables() if "kernel" in v.name]
        return data + 1e-2 * tf.add_n([tf.nn.l2_loss(k) for k in kernels]), {"x:0", "y:0"}

    with tracekit.open(str(path)) as trace:
        races = [r for r in trace.meta["races"] if r.get("tensor") == "loss/loss"]
        assert races and races[0]["read"] == "L2Loss" and races[0]["variable"] == "hidden/kernel:0"
        assert trace.meta["recomputed"]["loss/loss"] == 5
        assert "race      loss/loss reads hidden/kernel:0" in show(trace)
        for k, step in enumerate(trace):
            inputs = {key[len("input/"):]: step[key] for key in step if key.startswith("input/")}
            truth = _loss_from(tf, trace.state_before(k), inputs, build)
            assert float(step["loss/loss"]) == pytest.approx(truth, rel=2e-6), k


def test_each_step_starts_from_what_it_read_when_runs_between_steps_change_variables(tf, tmp_path):
    path = tmp_path / "sync.h5"
    proc = record_cli(path, "target_sync.py", "--steps", 9, "--sync", 4)

    def build():
        x = tf.compat.v1.placeholder(tf.float32, [8, 4], name="x")

        def net(scope):
            with tf.compat.v1.variable_scope(scope):
                h = tf.compat.v1.layers.dense(x, 16, tf.nn.tanh, name="h")
                return tf.compat.v1.layers.dense(h, 2, name="q")
        online, target = net("online"), net("target")
        tf.compat.v1.get_variable("episodes", [], tf.int64, trainable=False)
        return tf.reduce_mean(tf.square(online - (1.0 + 0.9 * tf.stop_gradient(target)))), {"x:0"}

    printed = _printed(proc)
    with tracekit.open(str(path)) as trace:
        # inputs as the graph consumed them: the script feeds float64 to a float32 placeholder
        assert trace.meta["fed_dtypes"] == {"x:0": "float64"} and trace.step(0)["input/x:0"].dtype == np.float32
        synced = [k for k, step in enumerate(trace) if any(key.endswith(BEFORE) for key in step)]
        assert synced == [1, 5]  # the steps a sync (and the counter's own run) came before
        assert "var/target/q/kernel:0" + BEFORE in trace.step(1) and "var/episodes:0" + BEFORE in trace.step(5)
        assert int(trace.state_before(5)["var/episodes:0"]) == 2
        for k, step in enumerate(trace):
            truth = _loss_from(tf, trace.state_before(k), {"x:0": step["input/x:0"]}, build)
            assert truth == pytest.approx(printed[k], rel=2e-6), k
            assert float(step["loss/loss"]) == pytest.approx(printed[k], abs=1e-7)


# ---- the audit the recorder keeps ------------------------------------------------------------------

@pytest.mark.tf1  # tf.contrib is TF 1.15's
def test_decoupled_weight_decay_beside_the_update_op_is_audited_with_it(tmp_path):
    # tf.contrib.opt.AdamWOptimizer moves the variable by an assign_sub before ApplyAdam: the
    # recorder knows the decay (its rate), and the audit applies it first; ApplyAdam alone would
    # call a faithful golden wrong. Its decay is ordered against nothing the forward pass reads:
    # TF1's own race, named.
    path = tmp_path / "adamw.h5"
    record_cli(path, "contrib_adamw.py", "--steps", 3)
    with tracekit.open(str(path)) as trace:
        assert trace.meta["updates"]["w:0"]["decay"] == pytest.approx(0.01)
        assert "also" not in trace.meta["updates"]["w:0"]
        audited, = [v for v in trace.meta["audit"]["variables"] if v["var"] == "w:0"]
        assert audited["verdict"] == "agrees", audited
        assert any(r.get("variable") == "w:0" and "AssignSub" in r.get("update", "") for r in trace.meta["races"])


def test_a_failed_check_names_the_gradients_that_disagree_and_what_is_in_question():
    # Where the variables whose gradients disagree are exactly those whose updates the recorder
    # read as hand-written assigns (its reading, not the loss, in question), the message says so
    # and gives no --loss advice; otherwise the loss is in question, and --loss is the advice.
    from tracekit.record.selfcheck import FAILED, LossCheck
    from tracekit.record.witness import Witness

    witness = Witness(None, "run.h5")
    witness.begin({}, {"emb:0": {"update": "assign"}, "dense/kernel:0": {"update": "ApplyAdam"}}, {})
    check = LossCheck("loss/loss", "Mean:0", FAILED, 0, "emb:0's gradient is off by 4.15e+03 times the round-off "
                      "allowed", 3, 4150.0, failing=("emb:0",))
    message = witness._failed([check], 3)
    assert "the gradients of emb:0 disagree" in message and "the 2 other variables' agree" in message
    assert "did not understand the update of emb:0" in message and "the loss is not in question" in message
    assert "--loss" not in message and "--gradient" in message
    # a variable whose update op was read disagrees too: the loss is in question
    check = LossCheck("loss/loss", "Mean:0", FAILED, 0, "...", 3, 9.0, failing=("emb:0", "dense/kernel:0"))
    message = witness._failed([check], 3)
    assert "--loss TENSOR" in message and "emb:0" in message


@pytest.mark.tf1  # tf.contrib is TF 1.15's
def test_a_custom_gradient_that_rebuilds_its_layers_is_checked_in_the_programs_graph(tf, tmp_path):
    # tf.contrib.layers.recompute_grad (gradient checkpointing) recomputes its block in the
    # backward pass through the variable scopes of the graph it runs in: a copy of the graph cannot
    # differentiate it, so the check's gradients are built in the program's graph (never run there)
    # and evaluated in a copy. The program's own steps are unchanged: the losses it prints.
    path = tmp_path / "recompute.h5"
    proc = record_cli(path, "recompute.py", "--steps", 3)
    with tracekit.open(str(path)) as trace:
        check, = trace.meta["self_check"]
        assert check["verdict"] == "verified" and check["variables"] == 8, check
        assert [v["verdict"] for v in trace.meta["audit"]["variables"]] == ["agrees"] * 8
        assert [round(float(s["loss/loss"]), 5) for s in trace] == _printed(proc)
    plain = run_python(sys.executable, [os.path.join(SCRIPTS, "recompute.py"), "--steps", "3"])
    assert _printed(plain) == _printed(proc)  # recording changed nothing the program computes


def _racy_truth(state, x, y):
    """numpy: racy_gradient.py's loss gradients of its first two layers, at `state`."""
    w1, b1, w2, b2, w3, b3 = (state["var/%s/%s:0" % (layer, part)].astype(np.float64)
                              for layer in ("h1", "h2", "out") for part in ("kernel", "bias"))
    h1 = np.tanh(x @ w1 + b1)
    h2 = np.tanh(h1 @ w2 + b2)
    d = 2.0 * (h2 @ w3 + b3 - y) / y.size
    d2 = (d @ w3.T) * (1 - h2 ** 2)
    d1 = (d2 @ w2.T) * (1 - h1 ** 2)
    return {"grad/h1/kernel:0": x.T @ d1, "grad/h1/bias:0": d1.sum(0), "grad/h2/kernel:0": h1.T @ d2,
            "grad/h2/bias:0": d2.sum(0)}


@pytest.mark.tf1
@pytest.mark.parametrize("ordered", [False, True])
def test_gradients_that_race_with_their_updates_are_named_and_measured(tmp_path, ordered):
    # ungated tf.gradients: the first layers' gradients read kernels whose updates need only their
    # own gradients. Every such read is named; the golden keeps each gradient as its update read
    # it (the audit agrees) and says how far the race moved it, held here to numpy's gradient from
    # the state the step started from. Which steps race is the scheduler's: both outcomes are
    # asserted. With the updates ordered after the gradients, nothing races.
    path = tmp_path / "racy.h5"
    record_cli(path, "racy_gradient.py", "--steps", 4, *(["--ordered"] if ordered else []))
    with tracekit.open(str(path)) as trace:
        meta = trace.meta
        raced = sorted(r["tensor"] for r in meta.get("races") or ())
        if ordered:
            assert raced == [] and "race_effects" not in meta
            return
        assert raced == ["grad/h1/bias:0", "grad/h1/kernel:0", "grad/h2/bias:0", "grad/h2/kernel:0"]
        assert all(v["verdict"] == "agrees" for v in meta["audit"]["variables"])
        moved = {}
        for k, step in enumerate(trace):
            truth = _racy_truth(trace.state_before(k), step["input/x:0"].astype(np.float64),
                                step["input/y:0"].astype(np.float64))
            for key, value in truth.items():
                moved[key] = max(moved.get(key, 0.0), float(np.max(np.abs(step[key] - value)) / np.max(np.abs(value))))
        effects = {key: e["effect"] for key, e in meta["race_effects"].items()}
        assert sorted(effects) == raced
        for key, effect in effects.items():  # the recorder's measure, against numpy's (round-off apart)
            assert effect == pytest.approx(moved[key], abs=1e-5), (key, effect, moved[key])
        worst = max(effects.values())
        said = show(trace)
        if worst > 1e-3:
            assert "no tolerance absorbs it" in said and "tf.control_dependencies(grads)" in said
            assert any("no tolerance absorbs it" in w for w in meta["warnings"])
        else:
            assert "within what a tolerance rule on them can absorb" in said


@pytest.mark.tf1
@pytest.mark.parametrize("ordered", [False, True])
def test_gradients_that_leave_a_while_loop_are_raced_where_its_input_reads_a_moving_kernel(tmp_path, ordered):
    # The dense head's kernel is read (its MatMul's gradient) before the RNN's backward loop; the
    # RNN's gradients reach their Exit only through the loop's back edge (NextIteration -> Merge),
    # which the race analysis follows: both are named racing with the head's update, and left out
    # of the self-check, which verifies the rest. Ordered, nothing races and every gradient verifies.
    path = tmp_path / "racy_rnn.h5"
    record_cli(path, "racy_rnn.py", "--steps", 3, *(["--ordered"] if ordered else []))
    with tracekit.open(str(path)) as trace:
        raced = sorted(r["tensor"] for r in trace.meta.get("races") or ())
        rnn = ["grad/rnn/basic_rnn_cell/bias:0", "grad/rnn/basic_rnn_cell/kernel:0"]
        assert raced == ([] if ordered else rnn)
        assert {r["variable"] for r in trace.meta.get("races") or ()} <= {"head/kernel:0"}
        check, = trace.meta["self_check"]
        assert check["verdict"] == "verified" and check["variables"] == (4 if ordered else 2), check
        assert all(v["verdict"] == "agrees" for v in trace.meta["audit"]["variables"])


@pytest.mark.tf1
def test_a_loss_scale_optimizer_records_the_loss_trained_and_its_updates_inside_a_cond(tmp_path):
    # The loss scale optimizer differentiates loss x scale through Adam's compute_gradients (a
    # wrapper's inner call: the program's own call is the one noted, so the loss is the program's,
    # not the scaled one), and applies inside a tf.cond: its branch's ops are not fetchable (the
    # gradients are fetched where they enter it, the learning rate kept as the constant it is), and
    # the cond's Switch, made after the branch op that reads it, orders nothing less (no race).
    path = tmp_path / "loss_scale.h5"
    proc = record_cli(path, "loss_scale.py", "--steps", 4)
    printed = [float(v) for v in re.findall(r"^step loss (\S+)$", proc.stdout, re.M)]
    with tracekit.open(str(path)) as trace:
        assert [float(s["loss/loss"]) for s in trace] == pytest.approx(printed, rel=1e-6)
        assert not trace.meta.get("races") and not trace.meta["warnings"], trace.meta.get("races")
        check, = trace.meta["self_check"]
        assert check["verdict"] == "verified" and check["variables"] == 4
        assert [v["verdict"] for v in trace.meta["audit"]["variables"]] == ["agrees"] * 4
        assert float(trace.step(0)["lr/learning_rate"]) == pytest.approx(0.01)
        held, = trace.meta["held"].values()
        assert held["lr"] == 1 and held["grad"] == 4 and held["loss"] == 1


@pytest.mark.tf1
def test_a_draw_inside_a_cond_branch_is_recorded_where_the_branch_runs(tmp_path):
    # tflearn's dropout draws inside tf.cond(is_training, ...): session.run refuses to fetch the
    # draw, so the recorder fetches it through a Merge it adds outside the cond (reopening the
    # finalized graph), empty where the run takes the other branch. The program trains as it does
    # unrecorded, the draws are held where the branch ran and nowhere else, and the self-check,
    # which recomputes the gradients from them, verifies every step.
    path = tmp_path / "cond_dropout.h5"
    proc = record_cli(path, "cond_dropout.py", "--steps", 4)
    printed = [float(v) for v in re.findall(r"^step loss (\S+)$", proc.stdout, re.M)]
    alone = run_python(sys.executable, [os.path.join(SCRIPTS, "cond_dropout.py"), "--steps", "4"])
    assert printed == [float(v) for v in re.findall(r"^step loss (\S+)$", alone.stdout, re.M)]
    with tracekit.open(str(path)) as trace:
        assert not trace.meta["warnings"], trace.meta["warnings"]
        draw, = trace.names("random")
        assert ["random/" + draw in trace.step(i).keys() for i in range(4)] == [True, True, False, True]
        assert [float(s["loss/loss"]) for s in trace] == pytest.approx(printed, rel=1e-6)
        check, = trace.meta["self_check"]
        assert check["verdict"] == "verified" and check["variables"] == 4


@pytest.mark.tf1
def test_a_step_a_loss_scale_optimizer_skips_is_held_as_skipped(tmp_path):
    # A dynamic loss scale that starts too high overflows the first step's gradients: the optimizer
    # applies nothing there and lowers the scale. The self-check waits for the first step with
    # finite gradients and verifies it; the audit says the overflowed update was not applied (the
    # variable and its slots as they were) rather than disagreeing with a rule fed non-finite values.
    path = tmp_path / "skipped.h5"
    proc = record_cli(path, "loss_scale.py", "--steps", 3, "--initial-scale", "3e38", "--multiplier", "1e20")
    printed = [float(v) for v in re.findall(r"^step loss (\S+)$", proc.stdout, re.M)]
    with tracekit.open(str(path)) as trace:
        assert [float(s["loss/loss"]) for s in trace] == pytest.approx(printed, rel=1e-6)
        finite = [all(np.all(np.isfinite(s[k])) for k in s.keys() if k.startswith("grad/")) for s in trace]
        assert finite == [False, True, True]
        check, = trace.meta["self_check"]
        assert check["verdict"] == "verified" and check["step"] == 1 and check["variables"] == 4
        audited = audit_trace(trace)
        assert audited.ok
        tallies = {v.var: dict(v.tally) for v in audited.variables}
        overflowed = [name for name in tallies if not np.all(np.isfinite(trace.step(0)["grad/" + name]))]
        assert overflowed and all(tallies[name].get(NOT_APPLIED) == 1 for name in overflowed)
        for name in overflowed:  # not applied: the state after step 0 is the state before it
            np.testing.assert_array_equal(trace.step(0)["var/" + name], trace.initial["var/" + name])


@pytest.mark.tf1
def test_a_recording_whose_every_step_overflows_says_its_loss_is_unverified(tmp_path):
    path = tmp_path / "overflowing.h5"
    # a scale of inf that never changes: every step's gradients are NaN, every update skipped
    record_cli(path, "loss_scale.py", "--steps", 2, "--initial-scale", "inf", "--multiplier", "1.0")
    with tracekit.open(str(path)) as trace:
        check, = trace.meta["self_check"]
        assert check["verdict"] == "unverified" and "not finite" in check["detail"], check


def _replaced_truth(state, x, y, mode):
    """numpy: replaced_gradients.py's gradients at `state`, the flow back into the first layer
    halved (custom), clipped to 1e-3 (override) or as the chain rule has it (patched)."""
    w1, b1, w2, b2, w3, b3 = (state["var/%s/%s:0" % (layer, part)].astype(np.float64)
                              for layer in ("h1", "h2", "out") for part in ("kernel", "bias"))
    h1 = np.tanh(x @ w1 + b1)
    h2 = np.tanh(h1 @ w2 + b2)
    d = 2.0 * (h2 @ w3 + b3 - y) / y.size
    d2 = (d @ w3.T) * (1 - h2 ** 2)
    back = d2 @ w2.T
    back = {"custom": 0.5 * back, "override": np.clip(back, -1e-3, 1e-3), "patched": back}[mode]
    d1 = back * (1 - h1 ** 2)
    return {"h1/kernel:0": x.T @ d1, "h1/bias:0": d1.sum(0), "h2/kernel:0": h1.T @ d2, "h2/bias:0": d2.sum(0),
            "out/kernel:0": h2.T @ d, "out/bias:0": d.sum(0)}


@pytest.mark.tf1
@pytest.mark.parametrize("mode", ["custom", "override", "patched"])
def test_gradients_a_program_makes_by_its_own_rules_are_recorded_as_its_update_read_them(tmp_path, mode):
    # tf.custom_gradient, gradient_override_map, and tf.gradients replaced by a module's own function:
    # the gradients recorded are the ones the update read (not the chain rule's where the program
    # changed it), held to numpy at every step, the loss found and verified, the updates audited.
    path = tmp_path / ("%s.h5" % mode)
    proc = record_cli(path, "replaced_gradients.py", "--mode", mode, "--steps", 3)
    printed = [float(v) for v in re.findall(r"^step loss (\S+)$", proc.stdout, re.M)]
    with tracekit.open(str(path)) as trace:
        assert not trace.meta["warnings"], trace.meta["warnings"]
        check, = trace.meta["self_check"]
        assert check["verdict"] == "verified" and check["variables"] == 6
        assert audit_trace(trace).ok
        for k, step in enumerate(trace):
            assert float(step["loss/loss"]) == pytest.approx(printed[k], rel=1e-6)
            truth = _replaced_truth(trace.state_before(k), step["input/x:0"].astype(np.float64),
                                    step["input/y:0"].astype(np.float64), mode)
            for name, value in truth.items():
                np.testing.assert_allclose(step.gradient(name), value, rtol=1e-4, atol=1e-7, err_msg=name)
