"""The main job on the shipped goldens: replay each TF2 port against its TF 1.15 golden
and compare, printing the verdict and the largest error seen for each kind of tensor.

    .venv/bin/python tools/replay_examples.py [--out build/replays] [--goldens DIR]

Compared with Tolerance.training(): step 0 at the migration guide's single-step tolerance
(atol=1e-5, rtol=1e-6), later steps also allowing the port noise that accumulates through
the optimizer (TRAINING_ULPS; the ulps column below is what that bound was derived from).
--goldens tests/data/foreign_cpu replays the goldens recorded on another machine.
Exit code 1 if a port does not match.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import tracekit  # noqa: E402
import tracekit.tf2  # noqa: E402
from tools.ports import (estimator_model, estimator_shim, gan_model, keras_fit, momentum_model,  # noqa: E402
                         rnn_model, seed_example, slim_resnet, two_optimizers)
from tracekit.report.comparison import max_error_rows  # noqa: E402
from tracekit.report.environment import summary  # noqa: E402
from tracekit.report.text import table  # noqa: E402

TRAINING = tracekit.Tolerance.training()


def _plain(make):
    """A port whose make() gives (model, step): replay with model=."""
    def replay(golden, out):
        model, step = make()
        return tracekit.tf2.replay(golden, step, model=model, out=out)
    return replay


def _converted(cell):
    def replay(golden, out):
        model, step = rnn_model.make(cell)
        return tracekit.tf2.replay(golden, step, model=model, out=out, convert=rnn_model.conversions(model, cell))
    return replay


def _two_optimizers(golden, out):
    model, step, ema = two_optimizers.make()
    return tracekit.tf2.replay(golden, step, variables=two_optimizers.variables(model, ema), out=out)


def _gan(golden, out):
    models, steps = gan_model.make()
    return tracekit.tf2.replay(golden, steps, variables=gan_model.variables(models), out=out)


PORTS = [  # (golden, port, replay(golden path, out path) -> the actual trace)
    ("seed_example", "Keras model, tf.function", _plain(seed_example.make)),
    ("estimator_model", "Keras model, tf.function", _plain(estimator_model.make)),
    ("estimator_model", "tf.compat.v1.layers in a tf-keras layer (shim)", _plain(estimator_shim.make)),
    ("slim_resnet", "native Keras resnet_v1, tf.function", _plain(slim_resnet.make)),
    ("lstm_model", "Keras LSTM, converted weights", _converted("lstm")),
    ("gru_model", "Keras GRU, converted weights", _converted("gru")),
    ("two_optimizers", "Keras SGD + Adam + EMA", _two_optimizers),
    ("keras_fit", "compiled Keras model, its train_step", _plain(keras_fit.make)),
    ("momentum_model", "Keras model, tf.compat.v1.train.MomentumOptimizer", _plain(momentum_model.make)),
    ("gan_model", "Keras GAN, a step function per train op", _gan),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "build", "replays"))
    parser.add_argument("--goldens", default=os.path.join(os.path.dirname(HERE), "goldens"),
                        help="where the goldens are (default: goldens/)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failed = 0
    rows = []
    machines = []
    for index, (name, port, replay) in enumerate(PORTS):
        golden = os.path.join(args.goldens, name + ".h5")
        if not os.path.exists(golden):
            print("SKIPPED   %s <- %s: no %s" % (name, port, golden))
            continue
        actual = replay(golden, os.path.join(args.out, "%s-%d.h5" % (name, index)))
        result = tracekit.compare(golden, actual, TRAINING)
        if not machines:
            machines = [summary(result.environment_diff.golden), summary(result.environment_diff.actual)]
        print("%s  %s <- %s: %d steps, %d tensors compared" % (
            "MATCH   " if result.ok else "MISMATCH", name, port, result.steps, len(result.tensors)))
        if not result.ok:
            failed += 1
            print(result.report())
        for noise in result.noise:
            print("          accepted as explained noise from step %d: %s (%s, %s)"
                  % (noise.step, noise.key, noise.link, noise.source))
        for kind, count, abs_err, rel_err, ulps in max_error_rows(result):
            rows.append([name, port.split(",")[0], kind, count, abs_err, rel_err, ulps])
    print("\nlargest errors seen, per kind (over all steps and tensors but those round-off drives; ulps: in eps * the "
          "tensor's largest value):")
    print("\n".join(table(["golden", "port", "kind", "tensors", "max abs", "max rel", "ulps"], rows,
                          right=(3, 4, 5, 6))))
    print("goldens recorded on %s\nreplayed on         %s" % tuple(machines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
