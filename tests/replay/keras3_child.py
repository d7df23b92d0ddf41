"""Replay shipped ports as a user whose TensorFlow was imported before tracekit, without
TF_USE_LEGACY_KERAS: tf.keras is then Keras 3, and so are the ports' models and optimizers.
Prints one JSON line per case: {"case", "keras", "ok", "first"}.

    python tests/replay/keras3_child.py
"""

import json
import os
import sys

os.environ.pop("TF_USE_LEGACY_KERAS", None)
import tensorflow as tf  # noqa: E402  (first, as a conftest or the user's code would)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import tracekit  # noqa: E402
import tracekit.tf2  # noqa: E402
from tools.ports import estimator_model, keras_fit, seed_example  # noqa: E402

CASES = [  # (case, port, make options, replay options)
    ("seed_example", seed_example, {}, {}),
    ("estimator_model", estimator_model, {}, {}),
    ("lr schedule one step off", seed_example, {"lr_shift": 1}, {}),
    ("Adam epsilon 1e-7", estimator_model, {"epsilon": 1e-7}, {}),
    ("dropout left to TF2", estimator_model, {}, {"random": "none"}),
    # A compiled Keras 3 model's own train_step (tracekit.tf2.keras_train_step).
    ("keras_fit", keras_fit, {}, {}),
    ("keras_fit batch-norm momentum 0.9", keras_fit, {"bn_momentum": 0.9}, {}),
]

if __name__ == "__main__":
    for case, port, options, replay_options in CASES:
        golden = os.path.join(ROOT, "goldens", port.__name__.rsplit(".", 1)[1] + ".h5")
        model, step = port.make(**options)
        actual = tracekit.tf2.replay(golden, step, model=model, steps=3, **replay_options)
        # The training preset: step 0 at the default tolerance, explained noise accepted (the
        # fit model's dense bias before batch norm).
        result = tracekit.compare(golden, actual, tracekit.Tolerance.training())
        first = result.first_divergence
        print(json.dumps({"case": case, "keras": tf.keras.__version__, "ok": result.ok,
                          "first": None if first is None else [first.step, first.key],
                          "report": "" if result.ok == (not options and not replay_options) else result.report()}))
        actual.close()
