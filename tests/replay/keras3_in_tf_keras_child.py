"""A Keras 3 model (`import keras`) replayed in a process where tracekit selected tf-keras for
tf.keras (TF_USE_LEGACY_KERAS=1): the seed example's port written against Keras 3 directly.
Prints one JSON line per case: {"case", "keras", "tf_keras", "ok", "first"}.

    python tests/replay/keras3_in_tf_keras_child.py
"""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import tracekit  # noqa: E402
import tracekit.tf2  # noqa: E402  (selects tf-keras for tf.keras)
import keras  # noqa: E402  (Keras 3, used directly)
from tools.ports import supervised_step  # noqa: E402

tf = tracekit.tf2.tf
GOLDEN = os.path.join(ROOT, "goldens", "seed_example.h5")


class Seed(keras.Model):
    def __init__(self):
        super().__init__(name="seed")
        self.dense, self.dense_1 = keras.layers.Dense(2, name="dense"), keras.layers.Dense(2, name="dense_1")
        self.dense_2 = keras.layers.Dense(3, name="dense_2")

    def call(self, x):
        h1 = tracekit.tap("layer1", self.dense(x))
        return tracekit.tap("logits", self.dense_2(tracekit.tap("layer2", self.dense_1(h1))))


class Shifted(keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, schedule, shift):
        self.schedule, self.shift = schedule, shift

    def __call__(self, step):
        return self.schedule(step + self.shift)


def make(lr_shift=0):
    model = Seed()
    model(tf.ones((2, 3)))
    schedule = Shifted(keras.optimizers.schedules.PolynomialDecay(1e-3, 1000, end_learning_rate=0.0, power=1.0),
                       lr_shift)
    optimizer = keras.optimizers.SGD(schedule)
    loss_fn = keras.losses.CategoricalCrossentropy(from_logits=True)
    return model, supervised_step(model, optimizer, loss_fn)


if __name__ == "__main__":
    for case, options in (("keras 3 seed port", {}), ("lr schedule one step off", {"lr_shift": 1})):
        model, step = make(**options)
        actual = tracekit.tf2.replay(GOLDEN, step, model=model, steps=3)
        result = tracekit.compare(GOLDEN, actual)
        first = result.first_divergence
        print(json.dumps({"case": case, "keras": keras.__version__, "tf_keras": tf.keras.__name__, "ok": result.ok,
                          "first": None if first is None else [first.step, first.key],
                          "report": "" if result.ok == (not options) else result.report()}))
        actual.close()
