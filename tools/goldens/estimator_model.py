"""An Estimator model_fn trained with Estimator.train and the recorder's hook (TF 1.15 only:
tf.estimator is gone from TF >= 2.16).

A tf.data input_fn over fixed synthetic data (8 features, 3 classes, batch 16),
two tf.compat.v1.layers.dense layers with L2 regularization, batch normalization
(UPDATE_OPS), dropout, AdamOptimizer with an exponentially decaying learning rate.
The hidden layer, batch-norm and logits outputs are tapped. Run in the legacy
environment:

    .venv-legacy/bin/python tools/goldens/estimator_model.py goldens/estimator_model.h5 [--steps 50]
"""

from __future__ import print_function

import argparse
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import tracekit  # noqa: E402
import tracekit.tf1  # noqa: E402
import tensorflow as tf  # noqa: E402

FEATURES, CLASSES, BATCH = 8, 3, 16


def dataset():
    rng = np.random.RandomState(7)
    x = rng.randn(256, FEATURES).astype(np.float32)
    w = rng.randn(FEATURES, CLASSES).astype(np.float32)
    y = np.argmax(x.dot(w) + 0.5 * rng.randn(256, CLASSES), axis=1).astype(np.int32)
    return x, y


def input_fn():
    x, y = dataset()
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(BATCH, drop_remainder=True)


def l2(weights):
    """L2 weight decay written so that TF 1.15 and TF 2 run it alike (tf.contrib is TF1-only)."""
    return 1e-3 * tf.nn.l2_loss(weights)


def model_body(x, training):
    """The model's tf.compat.v1.layers code. A TF2 port can run it unchanged inside a
    tf-keras layer (tools/ports/estimator_shim.py)."""
    hidden = tf.compat.v1.layers.dense(x, 16, activation=tf.nn.relu, kernel_regularizer=l2, name="hidden")
    tracekit.tap("hidden", hidden)
    normed = tf.compat.v1.layers.batch_normalization(hidden, momentum=0.9, training=training, name="bn")
    tracekit.tap("bn", normed)
    dropped = tf.compat.v1.layers.dropout(normed, rate=0.25, training=training, name="dropout")
    logits = tf.compat.v1.layers.dense(dropped, CLASSES, kernel_regularizer=l2, name="logits")
    return tracekit.tap("logits", logits)


def model_fn(features, labels, mode, params):
    logits = model_body(features["x"], training=mode == tf.estimator.ModeKeys.TRAIN)
    tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    loss = tf.compat.v1.losses.get_total_loss()  # cross-entropy + the L2 terms
    global_step = tf.compat.v1.train.get_or_create_global_step()
    lr = tf.compat.v1.train.exponential_decay(1e-2, global_step, decay_steps=10, decay_rate=0.9)
    optimizer = tf.compat.v1.train.AdamOptimizer(lr)
    with tf.control_dependencies(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
        train_op = optimizer.minimize(loss, global_step=global_step)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def record_estimator(doc, model_fn, input_fn, seed, steps, meta):
    """Train an Estimator for --steps steps from a fresh model directory (no checkpoints or
    summaries), recording into the golden named on the command line."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=steps)
    args = parser.parse_args()
    model_dir = tempfile.mkdtemp(prefix="tracekit-estimator-")
    try:
        config = tf.estimator.RunConfig(model_dir=model_dir, tf_random_seed=seed, save_checkpoints_steps=None,
                                        save_checkpoints_secs=None, save_summary_steps=None, log_step_count_steps=None)
        estimator = tf.estimator.Estimator(model_fn, config=config)
        with tracekit.tf1.record(args.out, meta=meta) as rec:
            estimator.train(input_fn, steps=args.steps, hooks=[rec.hook()])
        print("recorded %d steps into %s" % (rec.steps, args.out))
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)


def main():
    record_estimator(__doc__, model_fn, input_fn, seed=3, steps=50,
                     meta={"example": "estimator", "description": "Estimator model_fn: tf.data input_fn, dense + L2, "
                                                                  "batch norm, dropout, Adam with exponential decay"})


if __name__ == "__main__":
    main()
