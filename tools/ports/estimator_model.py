"""Native Keras port of the Estimator model (goldens/estimator_model.h5): Dense + L2, batch
normalization, dropout, Dense logits; Adam with exponential decay; a hand-written step.

`make()` returns (model, step); its keyword arguments build the deliberately wrong ports
the tests must catch (they default to the right port).
"""

import tensorflow as tf

import tracekit
from tools.ports import distributed_step

# TF1 weight decay was 1e-3 * tf.nn.l2_loss(w) = 1e-3 * sum(w**2) / 2; Keras l2(c) is c * sum(w**2).
L2 = 0.5e-3


class EstimatorModel(tf.keras.Model):
    """synchronized: batch norm over the global batch under a strategy; dtype: the layers' own
    (None: the global policy's)."""

    def __init__(self, bn_momentum=0.9, synchronized=False, dtype=None):
        super().__init__(name="estimator_model")
        self.hidden = tf.keras.layers.Dense(16, activation="relu", kernel_regularizer=tf.keras.regularizers.l2(L2),
                                            name="hidden", dtype=dtype)
        self.bn = tf.keras.layers.BatchNormalization(momentum=bn_momentum, epsilon=1e-3, name="bn",
                                                     synchronized=synchronized, dtype=dtype)
        self.dropout = tf.keras.layers.Dropout(0.25, dtype=dtype)
        self.logits = tf.keras.layers.Dense(3, kernel_regularizer=tf.keras.regularizers.l2(L2), name="logits",
                                            dtype=dtype)

    def call(self, x, training=False):
        hidden = tracekit.tap("hidden", self.hidden(x))
        normed = tracekit.tap("bn", self.bn(hidden, training=training))
        return tracekit.tap("logits", self.logits(self.dropout(normed, training=training)))


def _adam(epsilon=1e-8):
    """The TF1 model's optimizer: Adam with exponential decay (TF1 AdamOptimizer's epsilon is 1e-8)."""
    schedule = tf.keras.optimizers.schedules.ExponentialDecay(1e-2, decay_steps=10, decay_rate=0.9)
    return tf.keras.optimizers.Adam(schedule, epsilon=epsilon)


def make(epsilon=1e-8, bn_momentum=0.9, regularization=True):
    model = EstimatorModel(bn_momentum)
    model(tf.zeros((16, 8)))
    optimizer = _adam(epsilon)
    cross_entropy = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(inputs):
        x, y = inputs["IteratorGetNext:0"], inputs["IteratorGetNext:1"]
        with tf.GradientTape() as tape:
            loss = cross_entropy(y, model(x, training=True))
            if regularization:
                loss += tf.add_n(model.losses)  # TF1 collected these on its own; Keras needs them added
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}

    return model, step


def make_distributed(strategy, slip=None, synchronized=True, epsilon=1e-8):
    """The port as a custom training loop under `strategy` (tools.ports.distributed_step): batch
    norm over the global batch, as TF1 computed it (synchronized=True); `slip` names a
    distribution slip (tools.ports.SLIPS) for the wrong ports the tests must catch."""
    with strategy.scope():
        model = EstimatorModel(synchronized=synchronized)
        model(tf.zeros((16, 8)))
        optimizer = _adam(epsilon)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    return model, distributed_step(strategy, model, optimizer, loss_fn, 16, x="IteratorGetNext:0",
                                   y="IteratorGetNext:1", regularization=True, slip=slip)


def make_mixed_precision(keep_float32=False, bn_momentum=0.9):
    """The port under Keras mixed precision (call with the global policy mixed_float16 set):
    float16 activations, float32 variables, a LossScaleOptimizer. keep_float32=True builds the
    layers in float32 anyway (a port that forgot mixed precision somewhere)."""
    model = EstimatorModel(bn_momentum, dtype="float32" if keep_float32 else None)
    model(tf.zeros((16, 8)))
    optimizer = tf.keras.mixed_precision.LossScaleOptimizer(_adam())
    cross_entropy = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(inputs):
        x, y = inputs["IteratorGetNext:0"], inputs["IteratorGetNext:1"]
        with tf.GradientTape() as tape:
            loss = cross_entropy(y, tf.cast(model(x, training=True), tf.float32)) + tf.add_n(model.losses)
            scaled = optimizer.get_scaled_loss(loss)
        grads = optimizer.get_unscaled_gradients(tape.gradient(scaled, model.trainable_variables))
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}

    return model, step
