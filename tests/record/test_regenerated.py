"""Random draws kept as their generator's key and counter (store/drawn.py, record/regenerated.py):
numpy's Philox makes TensorFlow's uniform draws bit for bit, and a recording keeps a seeded
draw so only where the values made again are the ones the step drew. Runs in both worlds
(TF 1.15 and TF 2's compat.v1 graphs draw with the same kernel)."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tracekit.report.trace import show
from tracekit.store.drawn import Drawn, matches, stride, uniform

RNG = np.random.default_rng(3)


def _uniform_op(tensor):
    """The RandomUniform op `tensor` was made from (the newest one in its graph)."""
    return [op for op in tensor.graph.get_operations() if op.type == "RandomUniform"][-1]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("seeds", [(1, None), (-7, 2 ** 40), (123456789, 3), (0, 5)])
@pytest.mark.parametrize("shape", [(3, 1001), (7,), (2, 3, 5)])
def test_numpy_makes_tensorflows_uniform_draws_at_every_run(tf, graph, dtype, seeds, shape):
    tf.compat.v1.set_random_seed(seeds[0])
    op = _uniform_op(tf.random.uniform(shape, dtype=getattr(tf, dtype), seed=seeds[1]))
    count = int(np.prod(shape))
    with tf.compat.v1.Session() as sess:
        for run in range(3):
            got = sess.run(op.outputs[0])
            drawn = Drawn(op.get_attr("seed"), op.get_attr("seed2"), run * stride(count), shape, dtype)
            assert matches(drawn, got), (run, drawn)
            assert not matches(Drawn(drawn.seed, drawn.seed2, drawn.offset + 1, shape, dtype), got)


def test_a_drawn_leaf_reads_back_as_its_values_and_refuses_a_damaged_descriptor(tmp_path):
    from tracekit.store import values

    drawn = Drawn(5, 9, 256 * 40, (4, 10), "float32")
    leaf = values.make_leaf(drawn, "here")
    assert leaf.array.nbytes == 24 and leaf.shape == (4, 10)
    back = values.restore_leaf(leaf.array, leaf.shape, leaf.logical, leaf.form)
    assert np.array_equal(back, uniform(5, 9, 256 * 40, 40).reshape(4, 10))
    for storage, shape, logical in ((leaf.array[:2], (4, 10), leaf.logical), (leaf.array, (-1, 10), leaf.logical),
                                    (leaf.array, (1 << 20, 1 << 20), leaf.logical),
                                    (leaf.array, (4, 10), "philox-uniform:int8")):
        with pytest.raises(ValueError):
            values.check_leaf(storage, shape, logical, leaf.form)


def test_a_recording_keeps_seeded_draws_as_their_generator_and_unseeded_ones_as_values(tf, tmp_path):
    """Two seeded dropouts (one also run between the steps, moving its counter by a run the
    recorder does not see) and an unseeded one: every draw the golden gives back is what the
    step drew (the program fetched them too), and each is stored in 24 bytes where numpy made
    it again, whole where it could not (the unseeded op's key is drawn at random)."""
    path = str(tmp_path / "drawn.h5")
    steps = 6
    with tf.Graph().as_default():
        tf.compat.v1.set_random_seed(11)
        x = tf.compat.v1.placeholder(tf.float32, [8, 64], name="x")
        hidden = tf.compat.v1.layers.dense(x, 64, activation=tf.nn.relu)
        first = tf.nn.dropout(hidden, rate=0.3)
        draws = {"first": _uniform_op(first)}
        second = tf.nn.dropout(tf.compat.v1.layers.dense(first, 64), rate=0.2)
        draws["second"] = _uniform_op(second)
        # seeds (0, 0): the kernel draws its key at random
        unseeded = tf.raw_ops.RandomUniform(shape=[8, 64], dtype=tf.float32, seed=0, seed2=0)
        draws["unseeded"] = unseeded.op
        loss = tf.reduce_mean(tf.square(second * tf.stop_gradient(unseeded)))
        train = tf.compat.v1.train.AdamOptimizer(1e-3).minimize(loss)
        drew = []
        with tracekit.tf1.record(path) as rec:
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                for k in range(steps):
                    feed = {x: RNG.standard_normal((8, 64)).astype(np.float32)}
                    _, got = sess.run([train, {n: op.outputs[0] for n, op in draws.items()}], feed)
                    drew.append(got)
                    if k == 2:
                        sess.run(draws["first"].outputs[0])  # a run outside the steps
        names = {n: op.outputs[0].name for n, op in draws.items()}
    with tracekit.open(path) as trace:
        assert len(trace) == steps
        for k in range(steps):
            for n, name in names.items():
                assert np.array_equal(trace.step(k)["random", name], drew[k][n]), (k, n)
        stored = {n: trace.info("random", name).stored_bytes for n, name in names.items()}
        shown = show(trace)
    assert stored["first"] == stored["second"] == 24 * steps
    assert stored["unseeded"] >= 8 * 64 * 4 * steps
    assert "draws     2 of 3 kept as their generator" in shown and "at %d steps in all" % (2 * steps) in shown
