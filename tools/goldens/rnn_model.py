"""A recurrent sequence classifier in TF1 style, recorded with the API: a tf.compat.v1.nn.
rnn_cell cell run by tf.compat.v1.nn.dynamic_rnn, a dense layer on the last output, softmax
cross-entropy. --cell lstm: LSTMCell(6, forget_bias=1.0) with AdamOptimizer; --cell gru:
GRUCell(6) with MomentumOptimizer(0.05, 0.9). Fixed random batches (numpy seed 0): 4
sequences of 5 steps of 3 features, 2 classes. Run in the legacy environment:

    .venv-legacy/bin/python tools/goldens/rnn_model.py goldens/lstm_model.h5 --cell lstm [--steps 20]
    .venv-legacy/bin/python tools/goldens/rnn_model.py goldens/gru_model.h5 --cell gru [--steps 20]
"""

from __future__ import print_function

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import tracekit  # noqa: E402
import tracekit.tf1  # noqa: E402
import tensorflow as tf  # noqa: E402

BATCH, TIME, FEATURES, UNITS, CLASSES = 4, 5, 3, 6, 2


CELLS = {
    "lstm": (lambda: tf.compat.v1.nn.rnn_cell.LSTMCell(UNITS, forget_bias=1.0),
             lambda: tf.compat.v1.train.AdamOptimizer(1e-2), "LSTMCell(6, forget_bias=1) + dynamic_rnn, dense, Adam"),
    "gru": (lambda: tf.compat.v1.nn.rnn_cell.GRUCell(UNITS),
            lambda: tf.compat.v1.train.MomentumOptimizer(0.05, 0.9), "GRUCell(6) + dynamic_rnn, dense, Momentum 0.9"),
}


def model(x, y, cell_name):
    make_cell, make_optimizer, _ = CELLS[cell_name]
    outputs, _ = tf.compat.v1.nn.dynamic_rnn(make_cell(), x, dtype=tf.float32)
    last = tracekit.tap("last_output", outputs[:, -1, :])
    logits = tracekit.tap("logits", tf.compat.v1.layers.dense(last, CLASSES, name="dense"))
    loss = tf.compat.v1.losses.softmax_cross_entropy(y, logits)
    global_step = tf.compat.v1.train.get_or_create_global_step()
    train_op = make_optimizer().minimize(loss, global_step=global_step)
    return loss, train_op


def batches(steps):
    rng = np.random.RandomState(0)
    for _ in range(steps):
        x = rng.randn(BATCH, TIME, FEATURES).astype(np.float32)
        y = np.eye(CLASSES, dtype=np.float32)[rng.randint(0, CLASSES, BATCH)]
        yield x, y


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--cell", choices=sorted(CELLS), required=True)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    meta = {"example": args.cell, "description": CELLS[args.cell][2] + "; random batches (4, 5, 3), 2 classes"}
    with tf.Graph().as_default():
        with tracekit.tf1.record(args.out, seed=1, meta=meta) as rec:
            features = tf.compat.v1.placeholder(tf.float32, [BATCH, TIME, FEATURES], name="x")
            labels = tf.compat.v1.placeholder(tf.float32, [BATCH, CLASSES], name="y")
            loss, train_op = model(features, labels, args.cell)
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                for x, y in batches(args.steps):
                    _, value = sess.run([train_op, loss], {features: x, labels: y})
                print("recorded %d steps into %s; final loss %.6f" % (rec.steps, args.out, value))


if __name__ == "__main__":
    main()
