"""TF2 ports of the Estimator model with MomentumOptimizer and a decaying learning rate
(goldens/momentum_model.h5): the same two dense layers and loss, a hand-written step.

TF1's MomentumOptimizer accumulates gradients and scales by the current rate
(accum = m*accum + g; var -= lr*accum). The right port keeps that rule by keeping the
optimizer: tf.compat.v1.train.MomentumOptimizer runs in TF2, in eager and tf.function, its
rate a callable of a step counter. The migration guide's mapping, Keras SGD(momentum=m),
accumulates steps (v = m*v - lr*g; var += v): the same while the rate is constant, not
after it changes.

`make()` returns (model, step); its keyword arguments build deliberately wrong ports.
"""

import tensorflow as tf

import tracekit

FEATURES, CLASSES = 6, 4


class MomentumModel(tf.keras.Model):
    def __init__(self):
        super().__init__(name="momentum_model")
        self.hidden = tf.keras.layers.Dense(32, activation="relu", name="hidden")
        self.logits = tf.keras.layers.Dense(CLASSES, name="logits")

    def call(self, x):
        return tracekit.tap("logits", self.logits(tracekit.tap("hidden", self.hidden(x))))


def make(optimizer="tf1", momentum=0.9, decay_steps=5, nesterov=False, count_steps=True):
    """optimizer="tf1": TF1's rule (right); "keras": the guide's SGD(momentum=...) mapping.
    count_steps=False: the TF1 optimizer is given no global_step (a constant rate needs none)."""
    model = MomentumModel()
    model(tf.zeros((1, FEATURES)))
    schedule = tf.keras.optimizers.schedules.ExponentialDecay(0.05, decay_steps=decay_steps, decay_rate=0.5,
                                                              staircase=True)
    cross_entropy = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if optimizer == "keras":
        keras_sgd = tf.keras.optimizers.SGD(schedule, momentum=momentum, nesterov=nesterov)

        def update(grads):
            keras_sgd.apply_gradients(zip(grads, model.trainable_variables))
    else:
        global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        tf1_momentum = tf.compat.v1.train.MomentumOptimizer(lambda: schedule(global_step), momentum,
                                                            use_nesterov=nesterov)

        def update(grads):
            tf1_momentum.apply_gradients(zip(grads, model.trainable_variables),
                                         global_step=global_step if count_steps else None)

    @tf.function
    def step(inputs):
        x, y = inputs["IteratorGetNext:0"], inputs["IteratorGetNext:1"]
        with tf.GradientTape() as tape:
            loss = cross_entropy(y, model(x))
        update(tape.gradient(loss, model.trainable_variables))
        return {"loss": loss}

    return model, step
