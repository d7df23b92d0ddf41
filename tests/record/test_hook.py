"""rec.hook() for MonitoredTrainingSession and Estimator.train; rec.session() on a MonitoredSession."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit

DATA = np.arange(48, dtype=np.float32).reshape(12, 4) / 48.0


def _graph(tf):
    features = tf.compat.v1.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensor_slices(DATA).repeat().batch(3)).get_next()
    w = tf.compat.v1.get_variable("w", [4, 2], initializer=tf.compat.v1.ones_initializer())
    logits = tracekit.tap("logits", tf.matmul(features, w))
    loss = tf.reduce_mean(tf.square(logits))
    step = tf.compat.v1.train.get_or_create_global_step()
    train = tf.compat.v1.train.AdamOptimizer(0.1).minimize(loss, global_step=step)
    return loss, train


def _check(path, steps):
    with tracekit.open(path) as trace:
        assert len(trace) == steps
        assert [s.info["global_step"] for s in trace] == list(range(1, steps + 1))
        for k, step in enumerate(trace):
            batch = DATA[(3 * k) % 12:(3 * k) % 12 + 3]
            assert np.array_equal(step["input/IteratorGetNext:0"], batch)
            assert np.allclose(step["tap/logits"], batch @ (trace.initial["var/w:0"] if k == 0 else
                                                            trace.step(k - 1)["var/w:0"]), rtol=1e-6)
        assert set(trace.names("slot")) == {"w/Adam:0", "w/Adam_1:0", "beta1_power:0", "beta2_power:0"}


def test_hook_with_monitored_training_session(tf, tmp_path):
    path = str(tmp_path / "hook.h5")
    with tf.Graph().as_default():
        with tracekit.tf1.record(path) as rec:
            loss, train = _graph(tf)
            hooks = [rec.hook(), tf.compat.v1.train.StopAtStepHook(last_step=5)]
            with tf.compat.v1.train.MonitoredTrainingSession(
                    hooks=hooks, save_checkpoint_secs=None, save_summaries_steps=None,
                    log_step_count_steps=None) as sess:
                while not sess.should_stop():
                    sess.run([train, loss])
    _check(path, 5)


def test_session_on_a_monitored_session(tf, tmp_path):
    path = str(tmp_path / "monitored.h5")
    with tf.Graph().as_default():
        with tracekit.tf1.record(path) as rec:
            loss, train = _graph(tf)
            with tf.compat.v1.train.MonitoredSession() as sess:
                rec.session(sess)
                for _ in range(3):
                    sess.run(train)
    _check(path, 3)


@pytest.mark.tf1
def test_estimator_train_with_the_hook(tf, tmp_path):
    path = str(tmp_path / "estimator.h5")

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": DATA}, np.arange(12) % 2)).repeat().batch(4)

    def model_fn(features, labels, mode):
        hidden = tf.compat.v1.layers.dense(features["x"], 6, activation=tf.nn.relu, name="hidden")
        hidden = tf.compat.v1.layers.dropout(hidden, rate=0.5, training=True)
        logits = tracekit.tap("logits", tf.compat.v1.layers.dense(hidden, 2, name="logits"))
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
        train = tf.compat.v1.train.AdamOptimizer(0.01).minimize(
            loss, global_step=tf.compat.v1.train.get_or_create_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train)

    config = tf.estimator.RunConfig(model_dir=str(tmp_path / "model"), tf_random_seed=1,
                                    save_checkpoints_steps=None, save_checkpoints_secs=None)
    with tracekit.tf1.record(path) as rec:
        tf.estimator.Estimator(model_fn, config=config).train(input_fn, steps=6, hooks=[rec.hook()])
    with tracekit.open(path) as trace:
        assert len(trace) == 6 and trace.names("tap") == ["logits"]
        assert trace.names("input") == ["IteratorGetNext:0", "IteratorGetNext:1"]
        assert len(trace.names("random")) == 1 and trace.names("loss") == ["loss"]
        assert np.array_equal(trace.step(2)["input/IteratorGetNext:0"], DATA[8:12])
