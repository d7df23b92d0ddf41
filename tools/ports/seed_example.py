"""TF2 port of the seed example (goldens/seed_example.h5): a tf.keras.Model with three
Dense layers, PolynomialDecay + SGD, softmax cross-entropy and a hand-written train step.

`make()` returns (model, step); its keyword arguments build the deliberately wrong ports
the tests must catch (they default to the right port).
"""

import tensorflow as tf

import tracekit
from tools.ports import distributed_step, supervised_step


class SeedModel(tf.keras.Model):
    def __init__(self, activation=None):
        super().__init__(name="seed")
        self.dense = tf.keras.layers.Dense(2, activation=activation, name="dense")
        self.dense_1 = tf.keras.layers.Dense(2, activation=activation, name="dense_1")
        self.dense_2 = tf.keras.layers.Dense(3, name="dense_2")

    def call(self, x):
        h1 = tracekit.tap("layer1", self.dense(x))
        h2 = tracekit.tap("layer2", self.dense_1(h1))
        return tracekit.tap("logits", self.dense_2(h2))


class ShiftedSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):
    """A schedule evaluated `shift` steps late or early (a classic porting slip)."""

    def __init__(self, schedule, shift):
        self.schedule, self.shift = schedule, shift

    def __call__(self, step):
        return self.schedule(step + self.shift)


def make(activation=None, lr_shift=0, reduction="sum_over_batch_size", eager=False, lr=1e-3):
    model = SeedModel(activation)
    model(tf.ones((2, 3)))  # build: replay loads the golden's initial weights into existing variables
    schedule = tf.keras.optimizers.schedules.PolynomialDecay(lr, 1000, end_learning_rate=0.0, power=1.0)
    if lr_shift:
        schedule = ShiftedSchedule(schedule, lr_shift)
    optimizer = tf.keras.optimizers.SGD(schedule)
    loss_fn = tf.keras.losses.CategoricalCrossentropy(from_logits=True, reduction=reduction)

    return model, supervised_step(model, optimizer, loss_fn, jit=not eager)


def make_distributed(strategy, slip=None, jit=True):
    """The port as a custom training loop under `strategy` (tools.ports.distributed_step); `slip`
    names a distribution slip (tools.ports.SLIPS) for the wrong ports the tests must catch."""
    with strategy.scope():
        model = SeedModel()
        model(tf.ones((2, 3)))
        schedule = tf.keras.optimizers.schedules.PolynomialDecay(1e-3, 1000, end_learning_rate=0.0, power=1.0)
        optimizer = tf.keras.optimizers.SGD(schedule)
    loss_fn = tf.keras.losses.CategoricalCrossentropy(from_logits=True, reduction="none")
    return model, distributed_step(strategy, model, optimizer, loss_fn, 2, jit=jit, slip=slip)
