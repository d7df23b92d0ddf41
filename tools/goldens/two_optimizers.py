"""Two optimizers in one train op and an exponential moving average of the weights, in TF1
style, recorded with the API: the gradients computed once, a dense layer updated by
GradientDescentOptimizer(0.1), a second by AdamOptimizer(1e-2) (it increments the global step), then
ExponentialMovingAverage(0.9).apply over all four weights. Fixed random batches (numpy
seed 0) of 8 x 4 features, 3 classes. Run in the legacy environment:

    .venv-legacy/bin/python tools/goldens/two_optimizers.py goldens/two_optimizers.h5 [--steps 10]
"""

from __future__ import print_function

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import tracekit  # noqa: E402
import tracekit.tf1  # noqa: E402
import tensorflow as tf  # noqa: E402

BATCH, FEATURES, HIDDEN, CLASSES = 8, 4, 5, 3


def model(x, y):
    dense = tf.compat.v1.layers.dense
    hidden = tracekit.tap("hidden", dense(x, HIDDEN, activation=tf.nn.tanh, name="body"))
    logits = tracekit.tap("logits", dense(hidden, CLASSES, name="head"))
    loss = tf.compat.v1.losses.softmax_cross_entropy(y, logits)
    body = tf.compat.v1.trainable_variables("body")
    head = tf.compat.v1.trainable_variables("head")
    global_step = tf.compat.v1.train.get_or_create_global_step()
    # The gradients once, before either update: two minimize() calls side by side race (one
    # optimizer's update can run before the other's backward pass reads the weight it changed).
    grads = tf.gradients(loss, body + head)
    with tf.control_dependencies(grads):
        sgd = tf.compat.v1.train.GradientDescentOptimizer(0.1).apply_gradients(zip(grads[:2], body))
        adam = tf.compat.v1.train.AdamOptimizer(1e-2).apply_gradients(zip(grads[2:], head), global_step=global_step)
    ema = tf.compat.v1.train.ExponentialMovingAverage(0.9)
    with tf.control_dependencies([sgd, adam]):
        train_op = ema.apply(body + head)
    return loss, train_op


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    meta = {"example": "two_optimizers", "description": "SGD for the body, Adam for the head, EMA of all weights"}
    rng = np.random.RandomState(0)
    with tf.Graph().as_default():
        with tracekit.tf1.record(args.out, seed=1, meta=meta) as rec:
            features = tf.compat.v1.placeholder(tf.float32, [BATCH, FEATURES], name="x")
            labels = tf.compat.v1.placeholder(tf.float32, [BATCH, CLASSES], name="y")
            loss, train_op = model(features, labels)
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                for _ in range(args.steps):
                    x = rng.randn(BATCH, FEATURES).astype(np.float32)
                    y = np.eye(CLASSES, dtype=np.float32)[rng.randint(0, CLASSES, BATCH)]
                    _, value = sess.run([train_op, loss], {features: x, labels: y})
                print("recorded %d steps into %s; final loss %.6f" % (rec.steps, args.out, value))


if __name__ == "__main__":
    main()
