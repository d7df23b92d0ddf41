"""The TF2 port of tools/goldens/big_model.py: the same residual tanh blocks in Keras, Adam 1e-4.
`make(inner, slip=None, slip_at=23)` returns (model, step) for blocks `inner` wide; slip="scale" doubles the gradients
from step slip_at on (a loss-scaling or accumulation slip: the loss stays right, the gradients and
Adam's slots do not), a port made wrong between keyframes."""

import tensorflow as tf

import tracekit

WIDTH, BLOCKS, CLASSES = 768, 3, 10


class Big(tf.keras.Model):
    def __init__(self, inner):
        super().__init__(name="big")
        self.inp = tf.keras.layers.Dense(WIDTH, name="dense_in")
        self.up = [tf.keras.layers.Dense(inner, activation="tanh", name="block_%d_up" % i) for i in range(BLOCKS)]
        self.down = [tf.keras.layers.Dense(WIDTH, name="block_%d_down" % i) for i in range(BLOCKS)]
        self.head = tf.keras.layers.Dense(CLASSES, name="head")

    def call(self, x, training=False):
        h = self.inp(x)
        for up, down in zip(self.up, self.down):
            h = h + down(up(h))
        return tracekit.tap("logits", self.head(h))


def make(inner, slip=None, slip_at=23):
    model = Big(inner)
    model(tf.zeros((1, WIDTH)))
    optimizer = tf.keras.optimizers.Adam(1e-4, epsilon=1e-8)
    cross_entropy = tf.keras.losses.CategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(batch):
        with tf.GradientTape() as tape:
            loss = cross_entropy(batch["y:0"], model(batch["x:0"], training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        if slip == "scale":
            factor = tf.where(optimizer.iterations >= slip_at, 2.0, 1.0)
            grads = [g * factor for g in grads]
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}

    return model, step
