"""A TF1 Keras model trained with model.fit, recorded without changing a line of it:

    .venv-legacy/bin/python -m tracekit record -o goldens/keras_fit.h5 -- tools/goldens/keras_fit.py

tf.keras on TensorFlow 1.15 (graph mode): Dense(16) with a bias, BatchNormalization, ReLU,
Dropout(0.25), Dense(3) (the dense bias right before batch norm: its true gradient is zero); compiled with Adam(1e-2) and categorical cross-entropy; fit on
fixed synthetic data (numpy seed 0) in batches of 8, unshuffled, for 2 epochs of 8 steps.
Nothing here knows about tracekit.
"""

from __future__ import print_function

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

SAMPLES, FEATURES, CLASSES, BATCH = 64, 5, 3, 8


def data():
    rng = np.random.RandomState(0)
    x = rng.randn(SAMPLES, FEATURES).astype(np.float32)
    y = np.eye(CLASSES, dtype=np.float32)[rng.randint(0, CLASSES, SAMPLES)]
    return x, y


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    tf.compat.v1.set_random_seed(1)
    model = tf.keras.Sequential([
        tf.keras.layers.Dense(16, input_shape=(FEATURES,), name="hidden"),
        tf.keras.layers.BatchNormalization(name="bn"),
        tf.keras.layers.Activation("relu", name="relu"),
        tf.keras.layers.Dropout(0.25, name="dropout"),
        tf.keras.layers.Dense(CLASSES, name="logits"),
    ])
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-2),
                  loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True))
    x, y = data()
    history = model.fit(x, y, batch_size=BATCH, epochs=args.epochs, shuffle=False, verbose=0)
    print("trained %d epochs; final loss %.6f" % (args.epochs, history.history["loss"][-1]))


if __name__ == "__main__":
    main()
