"""How far a replay under N replicas lands from the same replay on one device: the tolerance
the all-reduce's other summation order needs, per kind, in float32 eps * the tensor's scale.

    .venv/bin/python tools/bench_replicas.py [--steps N]

Replays the shipped estimator and seed examples' distributed ports (tools/ports) under
MirroredStrategy over 1, 2 and 4 logical CPUs, same machine, and compares 2 and 4 replicas
with 1, bit for bit; prints the largest error of each kind (docs/DISTRIBUTE.md quotes it)."""

import argparse
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tracekit  # noqa: E402
import tracekit.tf2 as tf2  # noqa: E402

tf2.logical_cpus(4)  # before TensorFlow's runtime starts

from tools.ports import estimator_model, seed_example  # noqa: E402

PORTS = {"estimator_model": estimator_model.make_distributed, "seed_example": seed_example.make_distributed}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="replay only the first N steps")
    args = parser.parse_args()
    goldens = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "goldens")
    for name, make in PORTS.items():
        golden = os.path.join(goldens, name + ".h5")
        actual = {}
        for replicas in (1, 2, 4):
            strategy = tf2.mirrored(replicas)
            model, step = make(strategy)
            actual[replicas] = tf2.replay(golden, step, model=model, strategy=strategy, steps=args.steps)
        for replicas in (2, 4):
            result = tracekit.compare(actual[1], actual[replicas], tracekit.Tolerance.exact())
            errors = ", ".join("%s %.3g" % (e.kind, e.max_ulps) for e in result.max_errors() if e.max_ulps)
            print("%s, %d replicas vs 1 (%d steps): ulps %s" % (name, replicas, result.steps, errors or "none"))
        for trace in actual.values():
            trace.close()


if __name__ == "__main__":
    main()
