"""Long goldens (hundreds of steps) of models whose training passes through discontinuities:
ReLU, max-pooling, dropout and LSTM gates, recorded by tracekit on TF 1.15 (legacy environment).

    mlp   784 -> 128 -> 128 -> 128 -> 10 ReLU, softmax cross-entropy on one-hot labels, Adam 1e-3
          (its learning rate decays linearly from step 100, or --decay-from), an L2 weight decay from step 20
    conv  8x8x3 images: conv 3x3x8 + ReLU + 2x2 max-pool, conv 3x3x16 + ReLU + max-pool, dropout
          0.25, dense 10; Adam 1e-3
    lstm  sequences of 12 x 8: an LSTMCell of 32 units (dynamic_rnn), dense 10 on its last output;
          Adam 1e-3

Random data (numpy seed 0), batch 128 (the LSTM 64), recorded with the tracekit.tf1.record API.
The ports (tools/ports/long_models.py) and tools/long_goldens.py replay them;
tests/replay/test_long_goldens.py records smaller ones (--features, --hidden) at test time.

    .venv-legacy/bin/python tools/goldens/long_models.py OUT.h5 --model mlp [--steps 200] [--every K | --budget SIZE]
"""

from __future__ import print_function

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import tracekit  # noqa: E402
import tracekit.tf1  # noqa: E402
import tensorflow as tf  # noqa: E402

CLASSES = 10
DECAY_FROM, DECAY_STEPS = 100, 1000  # the learning rate: 1e-3, then linearly down to 0 over 1000 steps
WARMUP = 20  # the weight decay's first step
WEIGHT_DECAY = 1e-4


def _one_hot(rng, batch):
    return np.eye(CLASSES, dtype=np.float32)[rng.randint(0, CLASSES, size=batch)]


def mlp(args):
    x = tf.compat.v1.placeholder(tf.float32, [args.batch, args.features], name="x")
    y = tf.compat.v1.placeholder(tf.float32, [args.batch, CLASSES], name="y")
    h = x
    for i in range(args.layers):
        h = tracekit.tap("hidden%d" % i, tf.compat.v1.layers.dense(h, args.hidden, getattr(tf.nn, args.activation),
                                                                    name="dense_%d" % i))
    logits = tracekit.tap("logits", tf.compat.v1.layers.dense(h, CLASSES, name="logits"))
    step = tf.compat.v1.train.get_or_create_global_step()
    kernels = [v for v in tf.compat.v1.trainable_variables() if "kernel" in v.name]
    decay = WEIGHT_DECAY * tf.cast(step >= WARMUP, tf.float32) * tf.add_n([tf.nn.l2_loss(k) for k in kernels])
    loss = tf.compat.v1.losses.softmax_cross_entropy(y, logits) + decay
    rate = tf.compat.v1.train.polynomial_decay(1e-3, tf.maximum(step - args.decay_from, 0), DECAY_STEPS, 0.0)

    def feed(rng):
        return {x: rng.rand(args.batch, args.features).astype(np.float32), y: _one_hot(rng, args.batch)}
    return loss, rate, step, feed


def conv(args):
    x = tf.compat.v1.placeholder(tf.float32, [args.batch, 8, 8, 3], name="x")
    y = tf.compat.v1.placeholder(tf.float32, [args.batch, CLASSES], name="y")
    layers = tf.compat.v1.layers
    h = tracekit.tap("conv1", layers.conv2d(x, 8, 3, padding="same", activation=tf.nn.relu, name="conv1"))
    h = tracekit.tap("pool1", layers.max_pooling2d(h, 2, 2, name="pool1"))
    h = tracekit.tap("conv2", layers.conv2d(h, 16, 3, padding="same", activation=tf.nn.relu, name="conv2"))
    h = tracekit.tap("pool2", layers.max_pooling2d(h, 2, 2, name="pool2"))
    h = tf.nn.dropout(tf.reshape(h, [args.batch, 2 * 2 * 16]), rate=0.25)
    logits = tracekit.tap("logits", layers.dense(h, CLASSES, name="logits"))
    loss = tf.compat.v1.losses.softmax_cross_entropy(y, logits)

    def feed(rng):
        return {x: rng.rand(args.batch, 8, 8, 3).astype(np.float32), y: _one_hot(rng, args.batch)}
    return loss, 1e-3, tf.compat.v1.train.get_or_create_global_step(), feed


def lstm(args):
    x = tf.compat.v1.placeholder(tf.float32, [args.batch, 12, 8], name="x")
    y = tf.compat.v1.placeholder(tf.float32, [args.batch, CLASSES], name="y")
    cell = tf.compat.v1.nn.rnn_cell.LSTMCell(32, name="lstm_cell")
    outputs, _ = tf.compat.v1.nn.dynamic_rnn(cell, x, dtype=tf.float32, scope="rnn")
    last = tracekit.tap("last", outputs[:, -1, :])
    logits = tracekit.tap("logits", tf.compat.v1.layers.dense(last, CLASSES, name="logits"))
    loss = tf.compat.v1.losses.softmax_cross_entropy(y, logits)

    def feed(rng):
        return {x: rng.randn(args.batch, 12, 8).astype(np.float32), y: _one_hot(rng, args.batch)}
    return loss, 1e-3, tf.compat.v1.train.get_or_create_global_step(), feed


MODELS = {"mlp": mlp, "conv": conv, "lstm": lstm}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--model", choices=sorted(MODELS), default="mlp")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=None, help="default: 128 (lstm: 64)")
    parser.add_argument("--features", type=int, default=784, help="mlp: inputs per example")
    parser.add_argument("--hidden", type=int, default=128, help="mlp: units per hidden layer")
    parser.add_argument("--layers", type=int, default=3, help="mlp: hidden layers")
    parser.add_argument("--decay-from", type=int, default=DECAY_FROM,
                        help="mlp: the step the learning rate starts to decay at (default %(default)s)")
    parser.add_argument("--activation", default="relu", choices=["relu", "tanh"],
                        help="mlp: the hidden layers' (tanh: no kink, a plain replay of its port stays close)")
    parser.add_argument("--every", type=int, default=1, help="keyframes every K steps, digests between")
    parser.add_argument("--budget", default=None, help="a size the golden stays under (500MB): keyframes planned")
    parser.add_argument("--unknown-length", action="store_true",
                        help="do not tell the recorder how many steps the run has (a budget then plans online)")
    args = parser.parse_args()
    args.batch = args.batch or (64 if args.model == "lstm" else 128)
    rng = np.random.RandomState(0)
    with tf.Graph().as_default():
        tf.compat.v1.set_random_seed(1)
        with tracekit.tf1.record(args.out, seed=1, meta={"example": "long_" + args.model}, every=args.every,
                                 steps=None if args.unknown_length else args.steps, budget=args.budget) as rec:
            loss, rate, step, feed = MODELS[args.model](args)
            train = tf.compat.v1.train.AdamOptimizer(rate).minimize(loss, global_step=step)
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                for index in range(args.steps):
                    _, value = sess.run([train, loss], feed(rng))
                    if index % 50 == 0:
                        print("step %d loss %.5f" % (index, value), flush=True)


if __name__ == "__main__":
    main()
