"""The main job on the shipped goldens: replay each TF2 port, and the PyTorch ports, against its
TF 1.15 golden and compare, printing the verdict and the largest error seen for each kind of tensor.

    .venv/bin/python tools/replay_examples.py [--out build/replays] [--goldens DIR]

Compared with Tolerance.training(): step 0 at the migration guide's single-step tolerance
(atol=1e-5, rtol=1e-6), later steps also allowing the port noise that accumulates through
the optimizer (TRAINING_ULPS; the ulps column below is what that bound was derived from).
--goldens tests/data/foreign_cpu replays the goldens recorded on another machine.
Three ports wrong on purpose follow, each caught where it departs. The table of the largest
errors is written to OUT/errors.txt (printed with --tables, or when something fails); the last
line counts what ran, matched and was caught. Exit code 1 if a port does not match or a wrong
one does.
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
from tools.ports.torch import keras_fit as torch_keras_fit, rnn_model as torch_rnn, slim_resnet as torch_resnet  # noqa: E402,E501
import tracekit.torch  # noqa: E402
from tools.ports.jax import keras_fit as jax_keras_fit, rnn_model as jax_rnn, slim_resnet as jax_resnet  # noqa: E402
import tracekit.jax  # noqa: E402
from tracekit.report.comparison import headline, max_error_rows  # noqa: E402
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


def _torch(make):
    """A PyTorch port whose make() gives (model, step, {"optimizer": ..., other replay options})."""
    def replay(golden, out):
        model, step, own = make()
        return tracekit.torch.replay(golden, step, model=model, out=out, **own)
    return replay


def _jax(make):
    """A JAX port whose make() gives (train state, step[, other replay options])."""
    def replay(golden, out):
        state, step, *own = make()
        return tracekit.jax.replay(golden, step, state=state, out=out, **(own[0] if own else {}))
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
    ("keras_fit", "PyTorch nn.Module, TF's Adam and Keras' batch norm written out", _torch(torch_keras_fit.make)),
    ("lstm_model", "PyTorch nn.LSTM, converted weights", _torch(torch_rnn.make)),
    ("slim_resnet", "PyTorch resnet_v1", _torch(torch_resnet.make)),
    ("keras_fit", "JAX flax TrainState, TF's Adam as an optax transformation", _jax(jax_keras_fit.make)),
    ("lstm_model", "JAX flax nn.RNN(LSTMCell), converted weights", _jax(jax_rnn.make)),
    ("slim_resnet", "JAX flax resnet_v1, TF1's fused batch norm", _jax(jax_resnet.make)),
]


# Ports wrong on purpose, each caught where it departs: (golden, the slip, replay(golden, out)).
WRONG = [
    ("seed_example", "learning-rate schedule one step off", _plain(lambda: seed_example.make(lr_shift=1))),
    ("keras_fit", "batch norm momentum 0.9 where TF1 Keras used 0.99", _plain(lambda: keras_fit.make(bn_momentum=0.9))),
    ("keras_fit", "PyTorch: torch.optim.Adam, epsilon after the bias correction",
     _torch(lambda: torch_keras_fit.make(optimizer="torch"))),
    ("slim_resnet", "JAX: flax's BatchNorm, the moving variance without TF1's Bessel correction",
     _jax(lambda: jax_resnet.make(flax_batch_norm=True))),
]

CAPTION = ("largest errors seen, per kind, over all steps and tensors but those round-off drives. ulps: in eps times "
           "the tensor's largest value, the measure of round-off (a max rel of 10 at an element near zero is a few "
           "ulps); the training tolerance allows TRAINING_ULPS of them after step 0.")


def _named(result):
    """The report's first line that names a cause, if any."""
    return next((line for line in result.report().splitlines()
                 if line.startswith(("possible cause:", "named cause:", "hint:"))), None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "build", "replays"))
    parser.add_argument("--goldens", default=os.path.join(os.path.dirname(HERE), "goldens"),
                        help="where the goldens are (default: goldens/)")
    parser.add_argument("--tables", action="store_true", help="print the table of largest errors too (always "
                                                                "written to OUT/errors.txt)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    replayed = failed = matched = caught = 0
    rows = []
    machines = []
    for index, (name, port, replay) in enumerate(PORTS):
        golden = os.path.join(args.goldens, name + ".h5")
        if not os.path.exists(golden):
            print("SKIPPED   %s <- %s: no %s" % (name, port, golden))
            continue
        actual = replay(golden, os.path.join(args.out, "%s-%d.h5" % (name, index)))
        result = tracekit.compare(golden, actual, TRAINING)
        replayed += 1
        if not machines:
            machines = [summary(result.environment_diff.golden), summary(result.environment_diff.actual)]
        explained = "; round-off that training amplifies, explained, in %d tensor(s)" % len(result.noise) \
            if result.noise else ""
        print("%s  %s <- %s: %d steps, %d tensors compared%s" % (
            "MATCH   " if result.ok else "MISMATCH", name, port, result.steps, len(result.tensors), explained))
        if result.ok:
            matched += 1
        else:
            failed += 1
            print(result.report())
        for kind, count, abs_err, rel_err, ulps in max_error_rows(result):
            rows.append([name, port.split(",")[0], kind, count, abs_err, rel_err, ulps])
    for index, (name, slip, replay) in enumerate(WRONG):
        golden = os.path.join(args.goldens, name + ".h5")
        if not os.path.exists(golden):
            continue
        result = tracekit.compare(golden, replay(golden, os.path.join(args.out, "%s-wrong-%d.h5" % (name, index))),
                                  TRAINING)
        if result.ok:
            failed += 1
            print("MISSED    %s <- a wrong port (%s): it matches" % (name, slip))
            continue
        caught += 1
        print("CAUGHT    %s <- a wrong port (%s): %s" % (name, slip, headline(result)))
        named = _named(result)
        if named:
            print("          " + named)
    errors = os.path.join(args.out, "errors.txt")
    lines = [CAPTION] + table(["golden", "port", "kind", "tensors", "max abs", "max rel", "ulps"], rows,
                              right=(3, 4, 5, 6))
    with open(errors, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    if args.tables or failed:
        print("\n" + "\n".join(lines))
    print("goldens recorded on %s\nreplayed on         %s" % tuple(machines))
    print("ports: %d replayed, %d matched; wrong ports: %d of %d caught; largest errors per kind: %s"
          % (replayed, matched, caught, len(WRONG), errors))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
