"""What screening a golden costs: the first tracekit.open of a golden in a process walks it in a
forked child (tracekit/store/_screen.py), so that a crash of the HDF5 library on a damaged file
is not the caller's. Measured side by side, in one process, for each golden:

  open, screened     the first open: fork, walk every HDF5 object and raw chunk, answer
  open, unscreened   the same open with TRACEKIT_SCREEN=0
  read everything    every value of every step decoded (what any comparison reads at least)

and reported as the screen's cost (screened - unscreened) against reading everything: the
ratio a user's replay test pays once per golden per process. The fork copies the caller's
page tables, so the process's size matters: --tensorflow imports TensorFlow first, as a
replay test's process has. A benchmark, not a timed test.

    .venv/bin/python tools/bench_screen.py [--repeat 5] [--tensorflow] [--synthetic-mb 200] [GOLDEN ...]
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)


def _best(repeat, run):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def synthetic(path, megabytes, steps=10):
    """A golden of `steps` steps of float32 variables and gradients, about `megabytes` raw."""
    import tracekit

    rng = np.random.default_rng(0)
    per_step = max(1, int(megabytes * (1 << 20) / steps / 2 / 4))  # two float32 tensors a step
    with tracekit.create(path) as writer:
        for k in range(steps):
            with writer.step():
                writer.add("var", "w", rng.standard_normal(per_step, dtype=np.float32))
                writer.add("grad", "w", rng.standard_normal(per_step, dtype=np.float32))
    return path


def measure(path, repeat):
    import tracekit
    from tracekit.store import _screen

    def open_screened():
        _screen.forget()
        tracekit.open(path).close()

    def open_plain():
        os.environ["TRACEKIT_SCREEN"] = "0"
        try:
            tracekit.open(path).close()
        finally:
            del os.environ["TRACEKIT_SCREEN"]

    def read_all():
        with tracekit.open(path) as trace:
            for step in [trace.initial] + list(trace):
                for key in step:
                    step[key]

    screened, plain, full = _best(repeat, open_screened), _best(repeat, open_plain), _best(repeat, read_all)
    return screened, plain, full


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("goldens", nargs="*", help="goldens to measure (default: goldens/*.h5)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each measure; the best counts (default 5)")
    parser.add_argument("--tensorflow", action="store_true", help="import TensorFlow first (a replay's process)")
    parser.add_argument("--synthetic-mb", type=float, default=0,
                        help="also measure a synthetic golden of this many MB of float32 (10 steps)")
    args = parser.parse_args()
    if args.tensorflow:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
        import tensorflow  # noqa: F401
    paths = args.goldens or sorted(glob.glob(os.path.join(ROOT, "goldens", "*.h5")))
    with tempfile.TemporaryDirectory() as work:
        if args.synthetic_mb:
            paths.append(synthetic(os.path.join(work, "synthetic-%gMB.h5" % args.synthetic_mb), args.synthetic_mb))
        import resource

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print("process: peak RSS %.0f MB%s; best of %d runs each" % (
            rss, ", TensorFlow imported" if args.tensorflow else "", args.repeat))
        print("%-34s %9s %12s %14s %12s %12s" % ("golden", "MB", "open, screened", "open, unscreened",
                                                   "read all", "screen/read"))
        for path in paths:
            screened, plain, full = measure(path, args.repeat)
            print("%-34s %9.2f %12.3f s %14.4f s %10.3f s %11.2fx" % (
                os.path.basename(path), os.path.getsize(path) / 1e6, screened, plain, full, (screened - plain) / full))


if __name__ == "__main__":
    main()
