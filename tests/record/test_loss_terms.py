"""The parts of a loss the recorder finds (record/losses.loss_terms, record/terms.py): a sum of
scalar terms times constants, as A2C writes its loss, recorded in each step's info when asked
(loss_parts=True: fetching them may change how TensorFlow sums the loss) and claimed in the
metadata only once they sum to the loss; no part is a tensor of the golden's."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tracekit.record.losses import loss_terms
from tracekit.record.walk import constant


def parts(tf, loss):
    found, offset = loss_terms(loss, lambda t: constant(tf, t))
    return [(t.name, c) for t, c in found], offset


def test_a_sum_of_scaled_scalars_is_taken_apart(tf, graph):
    x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
    a = tf.reduce_mean(x, name="a")
    b = tf.reduce_sum(tf.square(x), name="b")
    c = tf.reduce_max(x, name="c")
    loss = a - b * 0.01 + 0.25 * c - 1.0 + tf.negative(tf.reduce_min(x, name="d")) / 4.0
    found, offset = parts(tf, loss)
    assert [n for n, _ in found] == ["a:0", "b:0", "c:0", "d:0"]
    assert [c for _, c in found] == pytest.approx([1.0, -0.01, 0.25, -0.25])
    assert offset == pytest.approx(-1.0)


@pytest.mark.parametrize("build", [
    lambda tf, x: tf.reduce_mean(x),  # one part: nothing to take apart
    lambda tf, x: tf.reduce_mean(x) * tf.reduce_max(x),  # a product of two tensors is one part
    lambda tf, x: tf.reduce_mean(x) + 2.0,  # one tensor and a constant
])
def test_what_is_not_a_sum_of_parts_has_none(tf, graph, build):
    x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
    assert parts(tf, build(tf, x)) == ([], 0.0)


def test_a_product_of_parts_is_one_part_of_a_sum(tf, graph):
    x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
    product = tf.multiply(tf.reduce_mean(x), tf.reduce_max(x), name="product")
    found, _ = parts(tf, product + tf.reduce_min(x, name="low") * 3.0)
    assert found == [("product:0", 1.0), ("low:0", 3.0)]


def test_the_parts_are_recorded_in_each_steps_info_and_sum_to_the_loss(tf, graph, tmp_path):
    path = str(tmp_path / "parts.h5")
    x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
    w = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.compat.v1.ones_initializer())
    fit = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0), name="fit")
    penalty = tf.reduce_sum(tf.abs(w), name="penalty")
    loss = tf.add(fit, 0.1 * penalty, name="total")
    train = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(loss)
    with tracekit.tf1.record(path, loss_parts=True) as rec:
        with tf.compat.v1.Session() as sess:
            rec.session(sess)
            sess.run(tf.compat.v1.global_variables_initializer())
            for k in range(3):
                sess.run(train, {x: np.full((4, 3), k + 1.0, np.float32)})
    with tracekit.open(path) as trace:
        entry, = [losses["loss/loss"] for losses in trace.meta["losses"].values()]
        assert [(p["tensor"], p["coefficient"]) for p in entry["terms"]["parts"]] == \
            [("fit:0", 1.0), ("penalty:0", pytest.approx(0.1))]
        for step in trace:
            fit_value, penalty_value = step.info["loss_terms"]["loss/loss"]
            assert fit_value + 0.1 * penalty_value == pytest.approx(float(step["loss/loss"]), rel=1e-6)
        assert trace.names("loss") == ["loss"]  # the parts are no tensors of the golden's
        assert not [w for w in trace.meta["warnings"] if "parts found" in w]


def one_step(tf, path, loss_parts):
    """A step of fit - 0.5 x size recorded at `path`, its parts asked for or not."""
    x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
    w = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.compat.v1.ones_initializer())
    loss = tf.reduce_mean(tf.matmul(x, w), name="fit") - 0.5 * tf.reduce_sum(w, name="size")
    train = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(loss)
    with tracekit.tf1.record(path, loss_parts=loss_parts) as rec:
        with tf.compat.v1.Session() as sess:
            rec.session(sess)
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(train, {x: np.ones((4, 3), np.float32)})
    return path


def test_show_lists_the_parts(tf, graph, tmp_path):
    from tracekit.report.trace import show

    with tracekit.open(one_step(tf, str(tmp_path / "parts.h5"), True)) as trace:
        assert "the sum of 1 x fit:0 + -0.5 x size:0, checked at its first step" in show(trace)


def test_the_parts_are_recorded_only_when_asked(tf, graph, tmp_path):
    with tracekit.open(one_step(tf, str(tmp_path / "plain.h5"), False)) as trace:
        entry, = [losses["loss/loss"] for losses in trace.meta["losses"].values()]
        assert "terms" not in entry and "loss_terms" not in trace.step(0).info
