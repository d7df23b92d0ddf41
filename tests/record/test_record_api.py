"""tracekit.tf1.record with rec.session(): what a step records, and that recording changes nothing."""

from __future__ import annotations

import contextlib
import os
import sys

import numpy as np
import pytest

import tracekit
from tracekit.report.trace import show
from tracekit.structure import structured

from ..support.recording import seed_feeds, seed_model

STEPS = 5


def _train(tf, sess, x, y, loss, train, steps=STEPS):
    losses = []
    for k in range(steps):
        fx, fy = seed_feeds(k)
        losses.append(sess.run([train, loss], {x: fx, y: fy})[1])
    return losses


@contextlib.contextmanager
def _seed_session(tf, path, optimizer="sgd", **options):
    """The seed model in a fresh graph, recorded into path, its variables initialized:
    yields (recorder, session, x, y, loss, train)."""
    with tf.Graph().as_default():
        with tracekit.tf1.record(path, **options) as rec:
            x, y, loss, train = seed_model(tf, optimizer)
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                yield rec, sess, x, y, loss, train


def _record_seed(tf, path, optimizer="sgd", train_steps=STEPS, **options):
    """Record the seed model trained for train_steps; returns (recorder, losses, final global step)."""
    with _seed_session(tf, path, optimizer, **options) as (rec, sess, x, y, loss, train):
        losses = _train(tf, sess, x, y, loss, train, steps=train_steps)
        global_step = sess.run(tf.compat.v1.train.get_global_step())
    return rec, losses, global_step


def test_a_step_records_everything(tf, tmp_path):
    path = str(tmp_path / "seed.h5")
    rec, losses, _ = _record_seed(tf, path)
    assert rec.steps == STEPS
    with tracekit.open(path) as trace:
        assert len(trace) == STEPS and trace.complete
        assert trace.names("input") == ["x:0", "y:0"]
        assert trace.names("tap") == ["layer1", "layer2", "logits"]
        assert trace.names("loss") == ["loss"] and trace.names("lr") == ["learning_rate"]
        assert sorted(trace.names("grad")) == sorted(["dense/kernel:0", "dense/bias:0", "dense_1/kernel:0",
                                                      "dense_1/bias:0", "dense_2/kernel:0", "dense_2/bias:0"])
        assert "global_step:0" in trace.names("var") and trace.info("var", "dense/kernel:0").initial
        before = trace.initial
        for k, step in enumerate(trace):
            fx, fy = seed_feeds(k)
            assert np.array_equal(step["input/x:0"], fx) and np.array_equal(step["input/y:0"], fy)
            assert step["loss/loss"] == losses[k]
            assert step["fetch/fetches"] == [None, losses[k]]
            assert step.info == {"global_step": k + 1, "train_ops": ["GradientDescent"]}
            assert np.isclose(step["lr/learning_rate"], 0.1 * (1 - k / 1000.0), rtol=1e-6)
            # The taps are this step's forward pass on the variables before its update ...
            h1 = fx @ before["var/dense/kernel:0"] + before["var/dense/bias:0"]
            h2 = h1 @ before["var/dense_1/kernel:0"] + before["var/dense_1/bias:0"]
            logits = h2 @ before["var/dense_2/kernel:0"] + before["var/dense_2/bias:0"]
            assert np.allclose(step["tap/layer1"], h1, rtol=1e-5, atol=1e-6)
            assert np.allclose(step["tap/logits"], logits, rtol=1e-5, atol=1e-6)
            # ... and SGD moved each variable by -lr * its recorded gradient.
            for name in trace.names("grad"):
                moved = before["var/" + name] - step["lr/learning_rate"] * step["grad/" + name]
                assert np.allclose(step["var/" + name], moved, rtol=1e-6, atol=1e-7), (k, name)
            before = step
        assert trace.meta["tensorflow"]["version"] == tf.__version__
        assert trace.meta["environment"]["tensorflow"] == tf.__version__
        # What selects kernels, as the session ran: threads resolved, oneDNN, XLA, devices.
        info = trace.meta["tensorflow"]
        assert info["threads"]["intra_op"] >= 1 and info["onednn"]["enabled"] in (True, False)
        assert info["xla_jit"] == "off" and info["determinism"] in (True, False)
        assert "CPU" in {d["type"] for d in info["devices"]} and isinstance(info["gpus"], list)
        env = trace.meta["environment"]
        assert env["cpu_usable"] >= 1 and "cpu_caches" in env
        # the program is the __main__ script, hashed when it has a file (pytest's launcher does;
        # an xdist worker's __main__ has none)
        main_file = getattr(sys.modules["__main__"], "__file__", None)
        assert bool(trace.meta["program"]["sha256"]) == bool(main_file)
        if env["machine"] == "x86_64" and sys.platform.startswith("linux"):
            assert "sse4_2" in env["cpu_isa"]
        if os.path.isdir("/sys/devices/system/cpu/cpu0/cache"):
            assert env["cpu_caches"]["L1d"]


def test_recording_does_not_change_the_run(tf, tmp_path):
    with tf.Graph().as_default():
        x, y, loss, train = seed_model(tf, "adam")
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            plain_losses = _train(tf, sess, x, y, loss, train)
            plain_vars = sess.run({v.name: v for v in tf.compat.v1.global_variables()})
    path = str(tmp_path / "adam.h5")
    _, losses, _ = _record_seed(tf, path, optimizer="adam")
    assert losses == plain_losses  # bit for bit
    with tracekit.open(path) as trace:
        last = trace.step(-1)
        assert [s["loss/loss"] for s in trace] == plain_losses
        for name, value in plain_vars.items():
            kind = "slot" if name in trace.names("slot") else "var"
            assert np.array_equal(last["%s/%s" % (kind, name)], value), name
        assert set(trace.names("slot")) >= {"dense/kernel/Adam:0", "dense/kernel/Adam_1:0", "beta1_power:0"}


def test_graph_built_before_recording(tf, tmp_path):
    """Gradients, learning rate and loss come from the graph itself, not only from interception."""
    path = str(tmp_path / "before.h5")
    with tf.Graph().as_default():
        x, y, loss, train = seed_model(tf)
        with tracekit.tf1.record(path) as rec, tf.compat.v1.Session() as sess:
            rec.session(sess)
            sess.run(tf.compat.v1.global_variables_initializer())
            _train(tf, sess, x, y, loss, train, steps=2)
    with tracekit.open(path) as trace:
        assert len(trace) == 2 and trace.names("loss") == ["loss"] and len(trace.names("grad")) == 6
        assert trace.names("lr") == ["learning_rate"]


def test_every_k_steps(tf, tmp_path):
    path = str(tmp_path / "every.h5")
    _record_seed(tf, path, train_steps=7, every=3)
    with tracekit.open(path) as trace:
        assert len(trace) == 7
        for kind in ("input", "loss", "lr"):
            assert trace.info(kind, trace.names(kind)[0]).steps == 7
        assert trace.series("grad", "dense/kernel:0").steps == [0, 3, 6]
        assert trace.series("tap", "layer1").steps == [0, 3, 6]
        assert trace.series("var", "dense/kernel:0").steps == [0, 3, 6]
        assert trace.meta["recording"]["every"] == 3


def test_step_limit_stops_recording_not_training(tf, tmp_path):
    path = str(tmp_path / "limit.h5")
    _, losses, global_step = _record_seed(tf, path, train_steps=5, steps=3)
    assert len(losses) == 5 and global_step == 5
    with tracekit.open(path) as trace:
        assert len(trace) == 3


def test_progress_is_told_each_recorded_step(tf, tmp_path):
    calls = []
    _record_seed(tf, str(tmp_path / "p.h5"), train_steps=5, steps=3, progress=lambda *a: calls.append(a))
    assert calls == [(1, 3), (2, 3), (3, 3)]
    calls.clear()
    _record_seed(tf, str(tmp_path / "q.h5"), train_steps=2, progress=lambda *a: calls.append(a))
    assert calls == [(1, None), (2, None)]


def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the resident size from Linux /proc")
def test_memory_stays_bounded_over_a_long_run(tf, tmp_path):
    # After a warm-up (allocator, HDF5 caches) the process must not grow with the steps:
    # anything kept per step and tensor (~20 tensors a step) would add megabytes here.
    path, samples = str(tmp_path / "long.h5"), {}
    with _seed_session(tf, path) as (_, sess, x, y, loss, train):
        for k in range(1500):
            fx, fy = seed_feeds(k % 50)
            sess.run([train, loss], {x: fx, y: fy})
            if k in (500, 1499):
                samples[k] = _rss_mb()
    with tracekit.open(path) as trace:
        assert len(trace) == 1500
    assert samples[1499] - samples[500] < 8, samples


def test_evaluation_and_init_runs_are_not_steps(tf, tmp_path):
    path = str(tmp_path / "eval.h5")
    with _seed_session(tf, path) as (_, sess, x, y, loss, train):
        fx, fy = seed_feeds(0)
        sess.run(loss, {x: fx, y: fy})  # evaluation
        sess.run(train, {x: fx, y: fy})
        sess.run([loss, tf.compat.v1.trainable_variables()], {x: fx, y: fy})
    with tracekit.open(path) as trace:
        assert len(trace) == 1


def test_dropout_tape_and_input_pipeline(tf, tmp_path):
    """The random tape holds the draws the step used: the dropout output is rebuilt from it."""
    path = str(tmp_path / "tape.h5")
    data = np.arange(48, dtype=np.float32).reshape(12, 4) / 10.0
    with tf.Graph().as_default():
        with tracekit.tf1.record(path, seed=3) as rec:
            features = tf.compat.v1.data.make_one_shot_iterator(
                tf.data.Dataset.from_tensor_slices(data).batch(3)).get_next()
            hidden = tf.compat.v1.layers.dense(features, 5, name="hidden")
            dropped = tracekit.tap("dropped", tf.nn.dropout(hidden, rate=0.4))
            tracekit.tap("hidden", hidden)
            loss = tf.reduce_mean(tf.square(dropped))
            train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                for _ in range(4):
                    sess.run(train)
    with tracekit.open(path) as trace:
        assert trace.names("input") == ["IteratorGetNext:0"]
        (draw,) = trace.names("random")
        masks = []
        for k, step in enumerate(trace):
            assert np.array_equal(step["input/IteratorGetNext:0"], data[3 * k:3 * k + 3])
            uniform = step["random/" + draw]
            assert uniform.shape == (3, 5)
            rebuilt = step["tap/hidden"] * (uniform >= 0.4) / np.float32(0.6)
            assert np.allclose(step["tap/dropped"], rebuilt, rtol=1e-6)
            masks.append(uniform >= 0.4)
        assert not all(np.array_equal(masks[0], m) for m in masks[1:])  # a new draw each step
        assert trace.meta["seeds"]["graph_seed"] == 3 and draw.rsplit(":", 1)[0] in trace.meta["seeds"]["ops"]


@pytest.mark.parametrize("mode", ["constant", "num_random_ops"])
def test_seed_modes(tf, tmp_path, mode):
    path = str(tmp_path / "seeds.h5")
    with tf.Graph().as_default():
        with tracekit.tf1.record(path, seed=11, seed_mode=mode) as rec:
            a = tf.compat.v1.random_uniform([3])
            b = tf.compat.v1.random_normal([3])
            w = tf.compat.v1.get_variable("w", [3], initializer=tf.compat.v1.random_uniform_initializer())
            train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(w * (a + b)))
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                sess.run(train)
    with tracekit.open(path) as trace:
        seeds = trace.meta["seeds"]
        assert seeds["seed"] == 11 and seeds["mode"] == mode
        got = sorted(tuple(v) for v in seeds["ops"].values())
        assert got == ([(11, 0)] * 3 if mode == "constant" else [(11, 0), (11, 1), (11, 2)])


def test_seed_reuse_is_an_error(tf, tmp_path):
    with tf.Graph().as_default():
        with pytest.raises(tracekit.tf1.SeedReuseError, match="operation seed 0 is used a second time"):
            with tracekit.tf1.record(str(tmp_path / "reuse.h5"), seed=1, seed_mode="num_random_ops") as rec:
                tf.compat.v1.random_uniform([2])
                rec.seed_control.operation_seed = 0
                tf.compat.v1.random_uniform([2])


def test_regularization_losses(tf, tmp_path):
    path = str(tmp_path / "reg.h5")
    with tf.Graph().as_default():
        with tracekit.tf1.record(path) as rec:
            x, y, loss, train = seed_model(tf, regularize=True)
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                _train(tf, sess, x, y, loss, train, steps=1)
    with tracekit.open(path) as trace:
        names = trace.names("loss")
        assert names[0] == "loss" and names[-1] == "regularization" and len(names) == 3
        assert "Regularizer" in names[1] and trace.meta["regularization_losses"] == [names[1]]
        step = trace.step(0)
        kernel = trace.initial["var/dense/kernel:0"]
        assert np.isclose(step["loss/" + names[1]], 1e-2 * np.sum(kernel ** 2), rtol=1e-5)
        assert step["loss/regularization"] == step["loss/" + names[1]]  # the sum of the (one) terms


def test_tap_errors(tf):
    with tf.Graph().as_default():
        a = tf.constant([1.0], name="a")
        b = tf.constant([2.0], name="b")
        tracekit.tap("same", a)
        tracekit.tap("same", a)  # the same tensor again is fine (a model function built twice)
        with pytest.raises(tracekit.UsageError, match="'same' is used twice in one graph: for a:0 and for b:0"):
            tracekit.tap("same", b)
        with pytest.raises(tracekit.UsageError, match="needs a TensorFlow or PyTorch tensor or a JAX array, got list"):
            tracekit.tap("x", [1.0])
        with pytest.raises(tracekit.UsageError, match="non-empty str"):
            tracekit.tap("", a)


def test_no_training_step_is_an_error(tf, tmp_path):
    path = str(tmp_path / "none.h5")
    with tf.Graph().as_default():
        with pytest.raises(tracekit.RecordError, match="no training step was recorded"):
            with tracekit.tf1.record(path) as rec:
                v = tf.compat.v1.get_variable("v", [2])
                with tf.compat.v1.Session() as sess:
                    rec.session(sess)
                    sess.run(tf.compat.v1.global_variables_initializer())
                    sess.run(v)
    with tracekit.open(path) as trace:  # the (empty) golden is still written and readable
        assert len(trace) == 0


def test_bad_arguments(tf, tmp_path):
    with pytest.raises(tracekit.TraceWriteError, match="the directory .*no.dir does not exist; create it first"):
        with tracekit.tf1.record(str(tmp_path / "no" / "dir" / "x.h5")):
            pass
    with pytest.raises(tracekit.UsageError, match="every must be >= 1"):
        tracekit.tf1.record(str(tmp_path / "x.h5"), every=0)
    with pytest.raises(tracekit.UsageError, match="seed mode must be 'constant' or 'num_random_ops'"):
        tracekit.tf1.record(str(tmp_path / "x.h5"), seed_mode="fixed")
    with tf.Graph().as_default():
        with pytest.raises(tracekit.UsageError, match="needs a tf.compat.v1.Session"):
            with tracekit.tf1.record(str(tmp_path / "y.h5")) as rec:
                rec.session(object())


def test_exception_in_training_keeps_completed_steps(tf, tmp_path):
    path = str(tmp_path / "crash.h5")
    with tf.Graph().as_default():
        with pytest.raises(RuntimeError, match="boom"):
            with tracekit.tf1.record(path) as rec:
                x, y, loss, train = seed_model(tf)
                with tf.compat.v1.Session() as sess:
                    rec.session(sess)
                    sess.run(tf.compat.v1.global_variables_initializer())
                    _train(tf, sess, x, y, loss, train, steps=3)
                    raise RuntimeError("boom")
    with tracekit.open(path) as trace:
        assert trace.complete and len(trace) == 3
    assert tracekit.verify(path).ok


def test_each_update_says_its_learning_rate_and_settings(tf, tmp_path):
    # Two optimizers over two halves of a model: a replay pairs each TF2 optimizer with the learning
    # rate its variables' updates read, and compares its settings with the constants they read.
    path = str(tmp_path / "updates.h5")
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        with tracekit.tf1.record(path) as rec:
            x = v1.placeholder(tf.float32, [4, 3], name="x")
            wide = v1.get_variable("wide", [3, 1], initializer=v1.zeros_initializer())
            deep = v1.get_variable("deep", [3, 1], initializer=v1.ones_initializer())
            loss = tf.reduce_sum(tf.matmul(x, wide) * tf.matmul(x, deep))
            ftrl = v1.train.FtrlOptimizer(0.2, l1_regularization_strength=0.25)
            rmsprop = v1.train.RMSPropOptimizer(0.01, decay=0.8, momentum=0.5)
            train = tf.group(ftrl.minimize(loss, var_list=[wide]), rmsprop.minimize(loss, var_list=[deep]))
            with v1.Session() as sess:
                rec.session(sess)
                sess.run(v1.global_variables_initializer())
                sess.run(train, {x: np.ones((4, 3), np.float32)})
    with tracekit.open(path) as trace:
        updates = trace.meta["updates"]
        rates = trace.names("lr")
    assert sorted(updates) == ["deep:0", "wide:0"] and len(rates) == 2
    # resource variables by default on TF 2: the Resource* update ops
    assert updates["wide:0"]["update"].endswith("ApplyFtrl") and updates["deep:0"]["update"].endswith("ApplyRMSProp")
    assert updates["wide:0"]["lr"] in rates and updates["deep:0"]["lr"] in rates
    assert updates["wide:0"]["lr"] != updates["deep:0"]["lr"]
    # TF 2's FtrlOptimizer computes l2 (l2 + beta / (2 lr)) in the graph: only constants are recorded
    ftrl = updates["wide:0"]["hyper"]
    assert ftrl.pop("l2", 0.0) == 0.0 and ftrl == {"l1": 0.25, "lr_power": -0.5}
    hyper = updates["deep:0"]["hyper"]
    assert np.isclose(hyper["rho"], 0.8) and np.isclose(hyper["momentum"], 0.5) and np.isclose(hyper["epsilon"], 1e-10)


@pytest.mark.parametrize("how", ["grouped", "late-read", "ordered"])
def test_a_learning_rate_read_unordered_with_its_counters_increment_is_a_race(tf, tmp_path, how):
    # TF1 research code groups the update with global_step.assign_add(1): nothing orders the
    # rate's read of the counter against the increment. apply_gradients(global_step=) orders it.
    path = str(tmp_path / "race.h5")
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        with tracekit.tf1.record(path) as rec:
            x = v1.placeholder(tf.float32, [4, 3], name="x")
            w = v1.get_variable("w", [3, 1], initializer=v1.ones_initializer())
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
            global_step = v1.train.get_or_create_global_step()
            counter = global_step
            if how == "late-read":
                with tf.control_dependencies([loss]):
                    counter = global_step.read_value()
            optimizer = v1.train.GradientDescentOptimizer(
                v1.train.exponential_decay(0.1, counter, decay_steps=1, decay_rate=0.5, staircase=True))
            grads = optimizer.compute_gradients(loss)
            train = optimizer.apply_gradients(grads, global_step=global_step) if how == "ordered" else \
                tf.group(optimizer.apply_gradients(grads), v1.assign_add(global_step, 1))
            with v1.Session() as sess:
                rec.session(sess)
                sess.run(v1.global_variables_initializer())
                for _ in range(2):
                    sess.run(train, {x: np.ones((4, 3), np.float32)})
    with tracekit.open(path) as trace:
        races, warnings = trace.meta.get("races", []), trace.meta["warnings"]
        shown = show(trace)
    if how == "ordered":
        assert races == [] and not any("race" in w for w in warnings) and "race " not in shown
        return
    assert [(r["lr"], r["counter"]) for r in races] == [("lr/learning_rate", "global_step:0")]
    assert any("a race in the training step" in w for w in warnings)
    assert "race      lr/learning_rate reads global_step:0" in shown


def test_inputs_keep_the_structure_of_the_element(tf, tmp_path):
    # A tf.data element (a dict of features and a label), flattened into input/IteratorGetNext:N,
    # keeps its dict keys and tuple positions in the golden; a replay hands it back as it was.
    path = str(tmp_path / "element.h5")
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        with tracekit.tf1.record(path) as rec:
            data = {"b": np.arange(8, dtype=np.float32), "a": np.ones(8, np.float32)}
            dataset = tf.data.Dataset.from_tensor_slices((data, np.arange(8) % 2)).batch(4).repeat()
            features, labels = v1.data.make_one_shot_iterator(dataset).get_next()
            w = v1.get_variable("w", [2, 1], initializer=v1.ones_initializer())
            x = tf.stack([features["a"], features["b"]], axis=1)
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w)[:, 0] - tf.cast(labels, tf.float32)))
            train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
            with v1.Session() as sess:
                rec.session(sess)
                sess.run(v1.global_variables_initializer())
                sess.run(train)
    with tracekit.open(path) as trace:
        element = trace.meta["inputs"]["element"]
        names = trace.names("input")
        step = {name: trace.step(0)["input", name] for name in names}
        assert "inputs    element ({a, b}, IteratorGetNext:2)" in show(trace)  # the dict's two, then the label
    (stored_features, stored_labels) = element["tuple"]
    assert sorted(stored_features["dict"]) == ["a", "b"] and stored_labels in names
    rebuilt = structured(step, {"element": element})["element"]
    assert np.array_equal(rebuilt[0]["b"], [0, 1, 2, 3]) and np.array_equal(rebuilt[1], [0, 1, 0, 1])


def test_what_each_kind_of_step_holds_is_said_and_a_step_of_no_input_and_no_loss_warned(tf, tmp_path):
    # steps that update variables from state alone (here a gradient held in a variable; gradients
    # accumulated by other runs look the same): the golden can check the update but nothing shows
    # a port computed anything, which the golden, show and verify say
    v1 = tf.compat.v1
    path = str(tmp_path / "pushed.h5")
    with tf.Graph().as_default():
        with tracekit.tf1.record(path) as rec:
            w = v1.get_variable("w", [3], initializer=v1.zeros_initializer())
            push = v1.get_variable("push", [3], trainable=False, initializer=v1.ones_initializer())
            train = v1.train.GradientDescentOptimizer(0.1).apply_gradients([(tf.identity(push), w)])
            with v1.Session() as sess:
                rec.session(sess)
                sess.run(v1.global_variables_initializer())
                for _ in range(3):
                    sess.run(train)
    with tracekit.open(path) as trace:
        assert len(trace) == 3
        assert trace.meta["held"] == {"GradientDescent": {"input": 0, "random": 0, "tap": 0, "loss": 0, "lr": 1,
                                                          "grad": 1}}
        warned = [w for w in trace.meta["warnings"] if "record no inputs and no losses" in w]
        assert len(warned) == 1 and "GradientDescent" in warned[0], trace.meta["warnings"]
        assert "holds     GradientDescent: inputs 0, random draws 0, taps 0, losses 0" in show(trace)
        assert "WARNING the training steps of GradientDescent record no inputs and no losses" in show(trace)
    verified = tracekit.verify(path)
    assert verified.ok and any("record no input and no loss" in note for note in verified.notes), verified.notes
    # a step with inputs and a loss: held, and no warning
    path = str(tmp_path / "seed.h5")
    _record_seed(tf, path)
    with tracekit.open(path) as trace:
        held, = trace.meta["held"].values()
        assert held == {"input": 2, "random": 0, "tap": 3, "loss": 1, "lr": 1, "grad": 6}
        assert not [w for w in trace.meta["warnings"] if "record no" in w]
