"""Record the family's goldens on TF 1.15 (legacy environment): each run of tools/family_spec.py
as a TF1 graph (tf.compat.v1.layers, tf.nn.dropout, its optimizer from tf.compat.v1.train),
trained on random data (numpy seed = the run's seed) and recorded whole at every step with the
tracekit.tf1.record API, no taps; with --every K, whole after every K-th step and as digests
(made in the graph) between. A golden that exists is kept.

    .venv-legacy/bin/python tools/goldens/family.py OUT_DIR [--size 24] [--steps N] [--only NAME,...] [--roundoff ULPS]
        [--every K]
"""

from __future__ import print_function

import argparse
import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tracekit  # noqa: E402
import tracekit.tf1  # noqa: E402
from tools import family_spec as spec  # noqa: E402


def gelu(x):
    return 0.5 * x * (1.0 + tf.math.erf(x / math.sqrt(2.0)))


ACTIVATIONS = {"relu": tf.nn.relu, "tanh": tf.nn.tanh, "gelu": gelu, "conv": tf.nn.relu}


def rounded(z, ulps):
    """z moved by up to `ulps` eps x max |z|, pseudo-randomly by its own value (family_spec's
    round-off emulation, the golden's salt); no gradient of its own."""
    if not ulps:
        return z
    hashed = tf.sin(z * (spec.SALTS["golden"] * 1e4)) * 43758.5453
    noise = (2.0 * (hashed - tf.floor(hashed)) - 1.0) * (ulps * spec.EPS32) * tf.reduce_max(tf.abs(z))
    return z + tf.stop_gradient(noise)


def build(run, x, y, roundoff=0.0):
    """The run's loss (cross-entropy plus the weight decay) on inputs `x`, labels `y`; `roundoff`:
    its ReLUs' pre-activations moved by up to that many ulps (family_spec)."""
    layers = tf.compat.v1.layers
    h = x
    if run.model == "conv":
        for i in range(run.depth - 1):
            h = layers.conv2d(h, run.channels, 3, padding="same", activation=None, name="conv_%d" % i)
            h = layers.max_pooling2d(tf.nn.relu(rounded(h, roundoff)), 2, 2, name="pool_%d" % i)
        h = tf.reshape(h, [run.batch, -1])
    else:
        for i in range(run.depth - 1):
            h = layers.dense(h, run.width, None, name="dense_%d" % i)
            h = tf.nn.relu(rounded(h, roundoff)) if run.model == "relu" else ACTIVATIONS[run.model](h)
    if run.dropout:
        h = tf.nn.dropout(h, rate=run.dropout)
    logits = layers.dense(h, spec.CLASSES, name="logits")
    kernels = [v for v in tf.compat.v1.trainable_variables() if "kernel" in v.name]
    decay = spec.DECAY * tf.add_n([tf.nn.l2_loss(k) for k in kernels])
    return tf.compat.v1.losses.softmax_cross_entropy(y, logits) + decay


def optimizer(run, step):
    rate = spec.RATES[run.optimizer]
    if run.optimizer == "momentum":
        return tf.compat.v1.train.MomentumOptimizer(rate, spec.MOMENTUM)
    rate = tf.compat.v1.train.exponential_decay(rate, step, spec.RATE_HALVING, 0.5)
    if run.optimizer == "adam":
        return tf.compat.v1.train.AdamOptimizer(rate)
    return tf.compat.v1.train.RMSPropOptimizer(rate, decay=spec.RHO, epsilon=spec.RMS_EPSILON)


def record(run, path, roundoff=0.0, every=1):
    rng = np.random.RandomState(run.seed)
    shape = [run.batch, spec.IMAGE, spec.IMAGE, 3] if run.model == "conv" else [run.batch, run.features]
    with tf.Graph().as_default():
        tf.compat.v1.set_random_seed(run.seed)
        with tracekit.tf1.record(path, seed=run.seed, meta={"example": "family", "run": run.to_dict(),
                                                                           "roundoff": roundoff},
                                 steps=run.steps, every=every) as rec:
            x = tf.compat.v1.placeholder(tf.float32, shape, name="x")
            y = tf.compat.v1.placeholder(tf.float32, [run.batch, spec.CLASSES], name="y")
            loss = build(run, x, y, roundoff)
            step = tf.compat.v1.train.get_or_create_global_step()
            with tf.control_dependencies([loss]):  # the loss reads the kernels before their update
                train = optimizer(run, step).minimize(loss, global_step=step)
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                for _ in range(run.steps):
                    labels = np.eye(spec.CLASSES, dtype=np.float32)[rng.randint(0, spec.CLASSES, size=run.batch)]
                    sess.run(train, {x: rng.rand(*shape).astype(np.float32), y: labels})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--size", type=int, default=spec.SIZE)
    parser.add_argument("--steps", type=int, default=0, help="at most this many steps per run (0: as specified)")
    parser.add_argument("--only", default="", help="run names, comma-separated")
    parser.add_argument("--roundoff", type=float, default=0.0, help="ULPS: the round-off emulation (family_spec)")
    parser.add_argument("--every", type=int, default=1, help="K: the state whole after every K-th step, digests between")
    args = parser.parse_args()
    if not os.path.isdir(args.out):
        os.makedirs(args.out)
    only = set(filter(None, args.only.split(",")))
    for run in spec.family(args.size, args.steps):
        path = os.path.join(args.out, run.name + ".h5")
        if (only and run.name not in only) or os.path.exists(path):
            continue
        record(run, path + ".part", args.roundoff, args.every)
        os.rename(path + ".part", path)
        print("recorded %s" % path, flush=True)


if __name__ == "__main__":
    main()
