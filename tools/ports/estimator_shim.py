"""The migration guide's shim route for the Estimator model: its tf.compat.v1.layers code,
unchanged (imported from the script that recorded the golden), inside a tf-keras layer
with tf.compat.v1.keras.utils.track_tf1_style_variables, which keeps TF1 variable names.
"""

import tensorflow as tf

from tools.goldens.estimator_model import model_body


class ShimModel(tf.keras.layers.Layer):
    @tf.compat.v1.keras.utils.track_tf1_style_variables
    def call(self, x, training=False):
        return model_body(x, training)


def make():
    model = ShimModel()
    model(tf.zeros((16, 8)), training=False)
    schedule = tf.keras.optimizers.schedules.ExponentialDecay(1e-2, decay_steps=10, decay_rate=0.9)
    optimizer = tf.keras.optimizers.Adam(schedule, epsilon=1e-8)
    cross_entropy = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(inputs):
        x, y = inputs["IteratorGetNext:0"], inputs["IteratorGetNext:1"]
        with tf.GradientTape() as tape:
            loss = cross_entropy(y, model(x, training=True)) + tf.add_n(model.losses)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}

    return model, step
