"""MLP goldens for the replay and compare benchmarks, recorded by tracekit on TF 1.15.

Runs in the legacy environment (Python 3.7, TF 1.15.5). A TF1 multilayer perceptron of
`tf.compat.v1.layers.dense` layers (ReLU, softmax cross-entropy, AdamOptimizer), fixed
random batches (numpy seed 0), recorded with the tracekit.tf1.record API; the hidden
layers' outputs are tapped. Three shapes, each its own golden under --out:

    big.h5      784 -> 1536 -> 1536 -> 1536 -> 10, batch 128, 20 steps: 5.94M parameters,
                ~96 MB of tensors a step (variables, Adam slots, gradients)
    small.h5    784 -> 128 -> 10, batch 32, 400 steps: the seed-shaped models, where the
                per-step fixed cost of a replay shows
    many.h5     4,000 scalar variables (one tensor each), 3 steps: the per-tensor overhead

    .venv-legacy/bin/python tools/mlp_data.py [--out build/bench/mlp] [--only big,small,many]

The TF2 port that replays them is `tools/bench_replay.py`'s; the goldens are not committed
(build/ is ignored).
"""

from __future__ import print_function

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import tracekit  # noqa: E402
import tracekit.tf1  # noqa: E402
import tensorflow as tf  # noqa: E402

SHAPES = {
    "big": dict(hidden=(1536, 1536, 1536), batch=128, steps=20),
    "small": dict(hidden=(128,), batch=32, steps=400),
}
FEATURES, CLASSES, MANY = 784, 10, 4000


def mlp(x, y, hidden):
    h = x
    for i, units in enumerate(hidden):
        h = tracekit.tap("hidden%d" % i, tf.compat.v1.layers.dense(h, units, tf.nn.relu, name="dense_%d" % i))
    logits = tf.compat.v1.layers.dense(h, CLASSES, name="logits")
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(y, logits)
    global_step = tf.compat.v1.train.get_or_create_global_step()
    train_op = tf.compat.v1.train.AdamOptimizer(1e-3).minimize(loss, global_step=global_step)
    return loss, train_op


def batches(batch, seed=0):
    rng = np.random.RandomState(seed)
    while True:
        yield rng.rand(batch, FEATURES).astype(np.float32), rng.randint(0, CLASSES, size=batch).astype(np.int32)


def record_mlp(path, hidden, batch, steps):
    data = batches(batch)
    with tf.Graph().as_default():
        with tracekit.tf1.record(path, seed=1, meta={"benchmark": "mlp", "hidden": list(hidden)}) as rec:
            x = tf.compat.v1.placeholder(tf.float32, [batch, FEATURES], name="x")
            y = tf.compat.v1.placeholder(tf.int32, [batch], name="y")
            loss, train_op = mlp(x, y, hidden)
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                for _ in range(steps):
                    features, labels = next(data)
                    sess.run([train_op, loss], {x: features, y: labels})
    return steps


def record_many(path, steps=3):
    """Many tiny tensors: each scalar variable scales one input feature's contribution."""
    with tf.Graph().as_default():
        with tracekit.tf1.record(path, seed=1, meta={"benchmark": "many"}) as rec:
            x = tf.compat.v1.placeholder(tf.float32, [MANY], name="x")
            weights = [tf.compat.v1.get_variable("w%04d" % i, [], initializer=tf.compat.v1.constant_initializer(0.5))
                       for i in range(MANY)]
            loss = tf.reduce_sum(tf.square(tf.stack(weights) * x - 1.0))
            global_step = tf.compat.v1.train.get_or_create_global_step()
            train_op = tf.compat.v1.train.GradientDescentOptimizer(1e-3).minimize(loss, global_step=global_step)
            rng = np.random.RandomState(0)
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                for _ in range(steps):
                    sess.run([train_op, loss], {x: rng.rand(MANY).astype(np.float32)})
    return steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join("build", "bench", "mlp"))
    parser.add_argument("--only", default="big,small,many", help="which goldens to record (comma-separated)")
    args = parser.parse_args()
    if not os.path.isdir(args.out):
        os.makedirs(args.out)
    for name in args.only.split(","):
        path = os.path.join(args.out, name + ".h5")
        start = time.time()
        steps = record_many(path) if name == "many" else record_mlp(path, **SHAPES[name])
        print("%s: %d steps, %.0f MB, %.1f s" % (path, steps, os.path.getsize(path) / 1e6, time.time() - start))


if __name__ == "__main__":
    main()
