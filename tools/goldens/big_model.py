"""A synthetic model of a chosen size (BERT-base is 110M parameters), trained with Adam on TF 1.15
and recorded by tracekit under a size budget: the real-size benchmark's golden
(tools/bench_big.py runs it; legacy environment).

The model: a 768-wide input projection, then 3 residual blocks of dense 768 -> INNER (tanh) ->
768, INNER as wide as the size asks (24,576 for 110M), and a 10-way softmax head; random inputs
(numpy seed 0), batch 32. No embedding table: a dense model's every variable and slot changes at
every step, the worst case for a golden's size. Shallow on purpose: 23 blocks of BERT's 3,072
amplify round-off under Adam until a correct port leaves the training tolerance by step 12
(its logits reach 18), which is the long-golden problem of docs/NUMERICS.md, not this benchmark's.

    .venv-legacy/bin/python tools/goldens/big_model.py OUT.h5 --params 110e6 --steps 100 --budget 1GB
    .venv-legacy/bin/python tools/goldens/big_model.py - --params 110e6 --steps 100   # no recorder: the floor

Prints one JSON line: the parameters, seconds (graph and session set-up, then the steps) and
the process's peak resident memory.
"""

from __future__ import print_function

import argparse
import contextlib
import json
import os
import resource
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tracekit  # noqa: E402
import tracekit.tf1  # noqa: E402

WIDTH, BLOCKS, CLASSES = 768, 3, 10


def inner_for(params):
    """The blocks' inner width that makes a model of about `params` parameters."""
    fixed = WIDTH * WIDTH + WIDTH + WIDTH * CLASSES + CLASSES + BLOCKS * WIDTH
    return max(1, int(round((params - fixed) / float(BLOCKS * (2 * WIDTH + 1)))))


def model(x, y, inner_width):
    h = tf.compat.v1.layers.dense(x, WIDTH, name="dense_in")
    for i in range(BLOCKS):
        inner = tf.compat.v1.layers.dense(h, inner_width, tf.nn.tanh, name="block_%d_up" % i)
        h = h + tf.compat.v1.layers.dense(inner, WIDTH, name="block_%d_down" % i)
    logits = tracekit.tap("logits", tf.compat.v1.layers.dense(h, CLASSES, name="head"))
    return tf.compat.v1.losses.softmax_cross_entropy(y, logits)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the golden to write, or - to train without recording")
    parser.add_argument("--params", type=float, default=110e6)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--budget", default=None)
    parser.add_argument("--every", type=int, default=1)
    args = parser.parse_args()
    inner = inner_for(args.params)
    rng = np.random.RandomState(0)
    start = time.time()
    with tf.Graph().as_default():
        tf.compat.v1.set_random_seed(1)
        recording = contextlib.suppress() if args.out == "-" else tracekit.tf1.record(
            args.out, seed=1, steps=args.steps, budget=args.budget, every=args.every, meta={"example": "big_model"})
        with recording as rec:
            x = tf.compat.v1.placeholder(tf.float32, [args.batch, WIDTH], name="x")
            y = tf.compat.v1.placeholder(tf.float32, [args.batch, CLASSES], name="y")
            loss = model(x, y, inner)
            train = tf.compat.v1.train.AdamOptimizer(1e-4).minimize(loss)
            params = int(sum(np.prod(v.shape.as_list()) for v in tf.compat.v1.trainable_variables()))
            with tf.compat.v1.Session() as sess:
                if rec is not None:
                    rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                ready = time.time()
                for _ in range(args.steps):
                    feed = {x: rng.randn(args.batch, WIDTH).astype(np.float32),
                            y: np.eye(CLASSES, dtype=np.float32)[rng.randint(0, CLASSES, args.batch)]}
                    sess.run(train, feed)
    done = time.time()
    print(json.dumps({"params": params, "inner": inner, "setup_s": ready - start, "steps_s": done - ready,
                      "total_s": done - start, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                      "golden_bytes": None if args.out == "-" else os.path.getsize(args.out)}))


if __name__ == "__main__":
    main()
