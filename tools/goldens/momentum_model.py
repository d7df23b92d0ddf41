"""The migration guide's Estimator shape with MomentumOptimizer and a decaying learning rate,
trained with Estimator.train and the recorder's hook (TF 1.15 only).

A tf.data input_fn over fixed synthetic data (6 features, 4 classes, batch 16), two
tf.compat.v1.layers.dense layers, MomentumOptimizer(momentum=0.9) with a learning rate
that halves every 5 steps (exponential_decay, staircase). TF1's momentum accumulates
gradients and Keras SGD's accumulates steps: the two part when the rate changes. The
hidden layer and logits are tapped. Run in the legacy environment:

    .venv-legacy/bin/python tools/goldens/momentum_model.py goldens/momentum_model.h5 [--steps 20]
"""

from __future__ import print_function

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import tracekit  # noqa: E402
import tensorflow as tf  # noqa: E402
from estimator_model import record_estimator  # noqa: E402  # this directory: the same Estimator run

FEATURES, CLASSES, BATCH = 6, 4, 16


def input_fn():
    rng = np.random.RandomState(11)
    x = rng.randn(320, FEATURES).astype(np.float32)
    y = np.argmax(x.dot(rng.randn(FEATURES, CLASSES)), axis=1).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(BATCH, drop_remainder=True)


def model_fn(features, labels, mode, params):
    hidden = tf.compat.v1.layers.dense(features["x"], 32, activation=tf.nn.relu, name="hidden")
    tracekit.tap("hidden", hidden)
    logits = tracekit.tap("logits", tf.compat.v1.layers.dense(hidden, CLASSES, name="logits"))
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    global_step = tf.compat.v1.train.get_or_create_global_step()
    lr = tf.compat.v1.train.exponential_decay(0.05, global_step, decay_steps=5, decay_rate=0.5, staircase=True)
    train_op = tf.compat.v1.train.MomentumOptimizer(lr, momentum=0.9).minimize(loss, global_step=global_step)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main():
    record_estimator(__doc__, model_fn, input_fn, seed=5, steps=20,
                     meta={"example": "momentum", "description": "Estimator model_fn: two dense layers, "
                                                                 "MomentumOptimizer with a learning rate halving every "
                                                                 "5 steps"})


if __name__ == "__main__":
    main()
