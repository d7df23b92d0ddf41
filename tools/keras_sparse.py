"""Measure how each Keras's optimizers update against TF1's, on dense and sparse gradients.

    .venv/bin/python tools/keras_sparse.py [--steps 3] [--json build/keras_sparse.json]

For each optimizer family, the same three steps from the same start are applied by
tf.compat.v1.train's optimizer (TF1's own code, which TF 2 still ships: the rule a golden
records), by tf-keras's and by Keras 3's, with TF1's settings given to Keras where Keras has
them. Each gets the gradient three ways: dense; sparse (a tf.IndexedSlices, as an embedding's
gradient) with distinct indices; sparse with an index repeated (a token seen twice in a batch).
The table gives the largest difference from TF1's variable after the steps, in float32 ulps of
the variable's scale: a few ulps is the order of the arithmetic, more is another rule. A
row that differs on the repeated path only is the per-row update docs/PORTS.md describes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

ROWS, WIDTH, LR = 6, 4, 0.05
REPEATED = np.array([1, 3, 1, 4, 1], np.int64)  # index 1 three times: a token seen thrice
DISTINCT = np.array([0, 2, 5], np.int64)

# family -> (TF1's optimizer, Keras class name, Keras keyword arguments giving TF1's settings, note)
FAMILIES = {
    "SGD": (lambda: tf.compat.v1.train.GradientDescentOptimizer(LR), "SGD", {}, ""),
    "Momentum": (lambda: tf.compat.v1.train.MomentumOptimizer(LR, 0.9), "SGD", {"momentum": 0.9},
                 "the same while the rate is constant (docs/PORTS.md: the momentum convention)"),
    "Adam": (lambda: tf.compat.v1.train.AdamOptimizer(LR, epsilon=1e-7), "Adam", {"epsilon": 1e-7}, ""),
    "Adagrad": (lambda: tf.compat.v1.train.AdagradOptimizer(LR, initial_accumulator_value=0.1), "Adagrad",
                {"initial_accumulator_value": 0.1, "epsilon": 1e-7},
                "Keras adds epsilon to sqrt(accumulator); TF1 does not"),
    "RMSprop": (lambda: tf.compat.v1.train.RMSPropOptimizer(LR, decay=0.9, epsilon=1e-7), "RMSprop",
                {"rho": 0.9, "epsilon": 1e-7},
                "TF1 starts the mean square at 1 and adds epsilon inside the square root"),
    "Adadelta": (lambda: tf.compat.v1.train.AdadeltaOptimizer(LR, rho=0.95, epsilon=1e-7), "Adadelta",
                 {"rho": 0.95, "epsilon": 1e-7}, ""),
    "Ftrl": (lambda: tf.compat.v1.train.FtrlOptimizer(LR, initial_accumulator_value=0.1), "Ftrl",
             {"initial_accumulator_value": 0.1}, ""),
}
PATHS = ("dense", "sparse, distinct indices", "sparse, repeated index")


def _kerases():
    found = {}
    try:
        import tf_keras

        found["tf-keras %s" % tf_keras.__version__] = tf_keras
    except ImportError:
        pass
    import keras

    found["Keras %s" % keras.__version__] = keras
    return found


def _gradients(path, steps):
    rng = np.random.RandomState(7)
    out = []
    for _ in range(steps):
        if path == "dense":
            out.append(rng.randn(ROWS, WIDTH).astype(np.float32))
        else:
            indices = DISTINCT if path.endswith("distinct indices") else REPEATED
            values = rng.randn(len(indices), WIDTH).astype(np.float32)
            out.append(tf.IndexedSlices(tf.constant(values), tf.constant(indices), tf.constant([ROWS, WIDTH])))
    return out


def _run(make, grads, start):
    var = tf.Variable(start)
    optimizer = make()
    for grad in grads:
        optimizer.apply_gradients([(grad, var)])
    return var.numpy()


def measure(steps):
    start = np.random.RandomState(3).randn(ROWS, WIDTH).astype(np.float32)
    scale = np.finfo(np.float32).eps * float(np.abs(start).max())
    rows = []
    for family, (tf1, name, kwargs, note) in FAMILIES.items():
        for path in PATHS:
            golden = _run(tf1, _gradients(path, steps), start)
            for label, keras in _kerases().items():
                make = lambda k=keras: getattr(k.optimizers, name)(learning_rate=LR, **kwargs)  # noqa: E731
                try:
                    port = _run(make, _gradients(path, steps), start)
                except Exception as exc:  # a Keras that refuses this gradient: say so
                    rows.append({"family": family, "path": path, "keras": label, "ulps": None,
                                 "rows": None, "error": str(exc).splitlines()[0][:80], "note": note})
                    continue
                diff = np.abs(port.astype(np.float64) - golden)
                rows.append({"family": family, "path": path, "keras": label, "ulps": float(diff.max() / scale),
                             "rows": [int(r) for r in np.nonzero(diff.max(axis=1) > 16 * scale)[0]],
                             "error": None, "note": note})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--json", help="also write the rows as JSON here")
    args = parser.parse_args()
    rows = measure(args.steps)
    print("%-9s %-25s %-15s %12s  %s" % ("optimizer", "gradient", "Keras", "ulps off TF1", "rows beyond 16 ulps"))
    for r in rows:
        said = r["error"] if r["error"] else "%12.3g  %s" % (r["ulps"], r["rows"] or "-")
        print("%-9s %-25s %-15s %s" % (r["family"], r["path"], r["keras"], said))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
