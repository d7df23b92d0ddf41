"""Helpers for the recorder tests (both worlds: TF 1.15 and TF 2's compat.v1): the seed
example's graph and data, and the zero-code command."""

from __future__ import annotations

import os
import sys

import numpy as np

from . import ROOT, run_python

SCRIPTS = os.path.join(ROOT, "tests", "record", "scripts")


def record_plain_loop(legacy_python, path, *script_args):
    """Record tests/record/scripts/plain_loop.py (a dense net, MSE, TF1's optimizer) on TF 1.15 at
    `path` with `script_args` ("--steps", "5", "--optimizer", "adagrad", ...); returns `path`."""
    run_python(legacy_python, ["-m", "tracekit", "record", "-o", str(path), "--", os.path.join(SCRIPTS, "plain_loop.py")]
               + [str(a) for a in script_args], cwd=ROOT)
    return str(path)


def record_optimizers(legacy_python, where, names, steps=5):
    """plain_loop.py recorded under each TF1 optimizer of `names` (its --optimizer choices) into
    the folder `where`, without dropout: {name: golden path}."""
    return {name: record_plain_loop(legacy_python, os.path.join(str(where), name + ".h5"), "--steps", steps,
                                    "--optimizer", name, "--dropout", 0) for name in names}


def record_cli(out, script, *script_args, **options):
    """`python -m tracekit record -o out [options] -- script args` in this interpreter."""
    check, env, timeout = options.pop("check", True), options.pop("env", None), options.pop("timeout", 300)
    args = ["-m", "tracekit", "record", "-o", str(out)]
    for key, value in options.items():  # a flag as True
        args += ["--" + key.replace("_", "-")] + ([] if value is True else [str(value)])
    args += ["--", os.path.join(SCRIPTS, script)] + [str(a) for a in script_args]
    return run_python(sys.executable, args, check=check, env=env, timeout=timeout)


def seed_model(tf, optimizer="sgd", regularize=False):
    """The seed example's graph: x (2, 3) -> dense 2 -> dense 2 -> dense 3, softmax CE."""
    import tracekit

    x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
    y = tf.compat.v1.placeholder(tf.float32, [2, 3], name="y")
    init = tf.compat.v1.glorot_uniform_initializer(seed=7)
    reg = tf.keras.regularizers.l2(1e-2) if regularize else None
    dense = tf.compat.v1.layers.dense
    h1 = tracekit.tap("layer1", dense(x, 2, kernel_initializer=init, kernel_regularizer=reg, name="dense"))
    h2 = tracekit.tap("layer2", dense(h1, 2, kernel_initializer=init, name="dense_1"))
    logits = tracekit.tap("logits", dense(h2, 3, kernel_initializer=init, name="dense_2"))
    tf.compat.v1.losses.softmax_cross_entropy(y, logits)
    loss = tf.compat.v1.losses.get_total_loss()
    step = tf.compat.v1.train.get_or_create_global_step()
    lr = tf.compat.v1.train.polynomial_decay(0.1, step, decay_steps=1000, end_learning_rate=0.0, power=1.0)
    opt = tf.compat.v1.train.AdamOptimizer(lr) if optimizer == "adam" else \
        tf.compat.v1.train.GradientDescentOptimizer(lr)
    train = opt.minimize(loss, global_step=step)
    return x, y, loss, train


def seed_feeds(step):
    rng = np.random.RandomState(step)
    return rng.randn(2, 3).astype(np.float32), np.eye(3, dtype=np.float32)[[step % 3, (step + 1) % 3]]
