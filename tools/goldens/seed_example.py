"""Seed example of the TF migration guide (TensorFlow's guide to validating numerical equivalence), recorded with the API.

Three tf.compat.v1.layers.dense layers (3 -> 2 -> 2 -> 3 units), softmax
cross-entropy, polynomial-decay learning rate, plain SGD; fixed inputs
x = ones((2, 3)) and one-hot labels for classes 0 and 1; the three layer outputs
tapped. Run in the legacy environment:

    .venv-legacy/bin/python tools/goldens/seed_example.py goldens/seed_example.h5 [--steps 100]
"""

from __future__ import print_function

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import tracekit  # noqa: E402
import tracekit.tf1  # noqa: E402
import tensorflow as tf  # noqa: E402


def model(x, y):
    dense = tf.compat.v1.layers.dense
    h1 = tracekit.tap("layer1", dense(x, 2, name="dense"))
    h2 = tracekit.tap("layer2", dense(h1, 2, name="dense_1"))
    logits = tracekit.tap("logits", dense(h2, 3, name="dense_2"))
    loss = tf.compat.v1.losses.softmax_cross_entropy(y, logits)
    global_step = tf.compat.v1.train.get_or_create_global_step()
    lr = tf.compat.v1.train.polynomial_decay(1e-3, global_step, decay_steps=1000, end_learning_rate=0.0, power=1.0)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(lr).minimize(loss, global_step=global_step)
    return loss, train_op


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    x = np.ones((2, 3), dtype=np.float32)
    y = np.eye(3, dtype=np.float32)[[0, 1]]
    meta = {"example": "seed", "description": "TF migration guide seed example: 3 dense layers, SGD, "
                                              "polynomial decay; x = ones((2, 3)), labels [0, 1]"}
    with tf.Graph().as_default():
        with tracekit.tf1.record(args.out, seed_mode="num_random_ops", seed=1, meta=meta) as rec:
            features = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
            labels = tf.compat.v1.placeholder(tf.float32, [2, 3], name="y")
            loss, train_op = model(features, labels)
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                for step in range(args.steps):
                    _, value = sess.run([train_op, loss], {features: x, labels: y})
                print("recorded %d steps into %s; final loss %.6f" % (rec.steps, args.out, value))


if __name__ == "__main__":
    main()
