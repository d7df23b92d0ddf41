"""The main job on the shipped goldens: replay each TF2 port against its TF 1.15 golden
and compare, printing the verdict and the largest error seen for each kind of tensor.

    .venv/bin/python tools/replay_examples.py [--out build/replays] [--goldens DIR]

Step 0 is held to the migration guide's single-step tolerance (atol=1e-5, rtol=1e-6),
later steps to atol=1e-4, rtol=1e-5 (round-off accumulates through the optimizer).
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
from tools.ports import estimator_model, estimator_shim, seed_example, slim_resnet  # noqa: E402
from tracekit.report.comparison import max_error_rows  # noqa: E402
from tracekit.report.environment import summary  # noqa: E402
from tracekit.report.text import table  # noqa: E402

TRAINING = tracekit.Tolerance().rule(steps=(1, None), atol=1e-4, rtol=1e-5)
PORTS = [
    ("seed_example", "Keras model, tf.function", seed_example.make),
    ("estimator_model", "Keras model, tf.function", estimator_model.make),
    ("estimator_model", "tf.compat.v1.layers in a tf-keras layer (shim)", estimator_shim.make),
    ("slim_resnet", "native Keras resnet_v1, tf.function", slim_resnet.make),
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
    for name, port, make in PORTS:
        golden = os.path.join(args.goldens, name + ".h5")
        model, step = make()
        out = os.path.join(args.out, "%s-%s.h5" % (name, make.__module__.rsplit(".", 1)[-1]))
        actual = tracekit.tf2.replay(golden, step, model=model, out=out)
        result = tracekit.compare(golden, actual, TRAINING)
        if not machines:
            machines = [summary(result.environment_diff.golden), summary(result.environment_diff.actual)]
        print("%s  %s <- %s: %d steps, %d tensors compared" % (
            "MATCH   " if result.ok else "MISMATCH", name, port, result.steps, len(result.tensors)))
        if not result.ok:
            failed += 1
            print(result.report())
        for kind, count, abs_err, rel_err, ulps in max_error_rows(result):
            rows.append([name, port.split(",")[0], kind, count, abs_err, rel_err, ulps])
    print("\nlargest errors seen, per kind (over all steps and tensors; ulps: in eps * the tensor's largest value):")
    print("\n".join(table(["golden", "port", "kind", "tensors", "max abs", "max rel", "ulps"], rows,
                          right=(3, 4, 5, 6))))
    print("goldens recorded on %s\nreplayed on         %s" % tuple(machines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
