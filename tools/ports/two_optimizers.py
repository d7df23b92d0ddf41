"""TF2 port of the two-optimizer example (goldens/two_optimizers.h5): the body trained by Keras
SGD, the head by Keras Adam (TF1's epsilon), then tf.train.ExponentialMovingAverage over all
four weights, written the natural way. The EMA's shadow variables exist before the replay
(`ema.apply` once), so they are replayed like the weights: pass `variables(model, ema)`.

`make()` returns (model, step, ema); its keyword arguments build deliberately wrong ports.
"""

import tensorflow as tf

import tracekit

FEATURES, HIDDEN, CLASSES = 4, 5, 3


class TwoPartModel(tf.keras.Model):
    def __init__(self):
        super().__init__(name="two_optimizers")
        self.body = tf.keras.layers.Dense(HIDDEN, activation="tanh", name="body")
        self.head = tf.keras.layers.Dense(CLASSES, name="head")

    def call(self, x):
        return tracekit.tap("logits", self.head(tracekit.tap("hidden", self.body(x))))


def make(body_lr=0.1, head_epsilon=1e-8, ema_decay=0.9, swap=False):
    model = TwoPartModel()
    model(tf.zeros((1, FEATURES)))
    weights = model.body.trainable_variables + model.head.trainable_variables
    ema = tf.train.ExponentialMovingAverage(ema_decay)
    ema.apply(weights)  # creates the shadow variables (equal to the weights: no change)
    sgd = tf.keras.optimizers.SGD(body_lr)
    adam = tf.keras.optimizers.Adam(1e-2, epsilon=head_epsilon)
    loss_fn = tf.keras.losses.CategoricalCrossentropy(from_logits=True)
    body, head = (model.head, model.body) if swap else (model.body, model.head)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = loss_fn(inputs["y:0"], model(inputs["x:0"]))
        body_vars, head_vars = body.trainable_variables, head.trainable_variables
        grads = tape.gradient(loss, body_vars + head_vars)
        sgd.apply_gradients(zip(grads[:len(body_vars)], body_vars))
        adam.apply_gradients(zip(grads[len(body_vars):], head_vars))
        ema.apply(weights)
        return {"loss": loss}

    return model, step, ema


def variables(model, ema):
    weights = model.body.trainable_variables + model.head.trainable_variables
    return weights + [ema.average(w) for w in weights]
