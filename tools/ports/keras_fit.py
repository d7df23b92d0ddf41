"""TF2 port of the TF1 Keras fit example (goldens/keras_fit.h5): the same Sequential model,
compiled the same way, trained through its own train_step on the recorded batches
(tracekit.tf2.keras_train_step: what fit runs per batch).

`make()` returns (model, step); its keyword arguments build deliberately wrong ports.
"""

import tensorflow as tf

import tracekit.tf2

FEATURES, CLASSES = 5, 3


def make(epsilon=1e-7, bn_momentum=0.99, dropout=0.25, use_bias=True):
    model = tf.keras.Sequential([
        tf.keras.layers.Dense(16, use_bias=use_bias, name="hidden"),
        tf.keras.layers.BatchNormalization(momentum=bn_momentum, name="bn"),
        tf.keras.layers.Activation("relu", name="relu"),
        tf.keras.layers.Dropout(dropout, name="dropout"),
        tf.keras.layers.Dense(CLASSES, name="logits"),
    ])
    model.build((None, FEATURES))
    # TF 1.15's tf.keras Adam is OptimizerV2 with Keras' epsilon, 1e-7 (not AdamOptimizer's 1e-8)
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-2, epsilon=epsilon),
                  loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True))
    return model, tracekit.tf2.keras_train_step(model, x="hidden_input:0", y="logits_target:0")
