"""Digests computed by TensorFlow where the values are, against the value fetched to numpy and
digested there (tracekit.store.digest), side by side in one run: what a recording or a replay
between keyframes pays per tensor on this machine's CPU.

    .venv-legacy/bin/python tools/bench_digest.py [--elements 24000000] [--repeat 5]   # TF 1.15, a Session
    .venv/bin/python tools/bench_digest.py                                            # TF 2, a tf.function

Variants, each over one float32 variable of --elements values:

    fetch       the value copied out to numpy, nothing else (the floor of any digest made in numpy)
    numpy       fetch, then digest.digest (statistics in float64, NaN and Inf counts, crc32, sample)
    numpy-nocrc the same without the crc32
    graph64     TensorFlow ops computing what a digest holds but the crc32 (no TF op makes a zlib
                CRC-32): the statistics in float64 over the finite elements, the NaN and Inf counts,
                and the sample by tf.gather; only those cross to numpy
    graph32     the same with min and max taken in float32 (the sums still accumulated in float64)
    sums32      only the sum and sum of squares, in float32, and the sample: the least a digest
                with statistics could hold
    sample      the sample alone by tf.gather: what the envelope verdict compares between keyframes
    pass        one float32 sum over the variable in the graph: the floor of any single pass over it
    xla64       (TF 2) graph64's ops compiled by XLA (jit_compile), free to fuse them
    xla32       (TF 2) every statistic accumulated in float32, compiled by XLA: what one fused pass
                over the tensor could cost (float32 sums carry round-off a digest would state)

Prints milliseconds (best of --repeat) and each variant's ratio to `numpy`. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable, Dict, List

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tracekit.store import digest  # noqa: E402


def graph_digest(x: Any, positions: Any, wide_extremes: bool) -> List[Any]:
    """The ops: what a digest holds, but its crc32, computed where x is."""
    flat = tf.reshape(x, [-1])
    x64 = tf.cast(flat, tf.float64)
    finite = tf.math.is_finite(flat)
    kept = tf.where(finite, x64, tf.zeros_like(x64))
    edge = x64 if wide_extremes else flat
    big = tf.fill(tf.shape(edge), tf.constant(np.inf, edge.dtype))
    return [tf.reduce_sum(kept), tf.reduce_sum(kept * kept), tf.reduce_sum(tf.abs(kept)),
            tf.reduce_min(tf.where(finite, edge, big)), tf.reduce_max(tf.where(finite, edge, -big)),
            tf.reduce_sum(tf.cast(tf.math.is_nan(flat), tf.int64)),
            tf.reduce_sum(tf.cast(tf.logical_not(finite), tf.int64)), tf.gather(flat, positions)]


def narrow_digest(x: Any, positions: Any) -> List[Any]:
    """graph_digest's statistics with every sum accumulated in float32."""
    flat = tf.reshape(x, [-1])
    finite = tf.math.is_finite(flat)
    kept = tf.where(finite, flat, tf.zeros_like(flat))
    big = tf.fill(tf.shape(flat), tf.constant(np.inf, flat.dtype))
    return [tf.reduce_sum(kept), tf.reduce_sum(kept * kept), tf.reduce_sum(tf.abs(kept)),
            tf.reduce_min(tf.where(finite, flat, big)), tf.reduce_max(tf.where(finite, flat, -big)),
            tf.reduce_sum(tf.cast(tf.math.is_nan(flat), tf.int32)),
            tf.reduce_sum(tf.cast(tf.logical_not(finite), tf.int32)), tf.gather(flat, positions)]


def cheap_digest(x: Any, positions: Any, sums: bool) -> List[Any]:
    """Lesser digests: the sample, with or without float32 sums (see the module)."""
    flat = tf.reshape(x, [-1])
    return [tf.reduce_sum(flat), tf.reduce_sum(flat * flat), tf.gather(flat, positions)] if sums else \
        [tf.gather(flat, positions)]


def variants(count: int) -> Dict[str, Callable[[], Any]]:
    value = np.random.RandomState(0).randn(count).astype(np.float32)
    positions = digest.positions(count)
    if hasattr(tf, "function") and tf.executing_eagerly():  # TF 2
        var = tf.Variable(value)
        wide = tf.function(lambda: graph_digest(var, positions, True))
        narrow = tf.function(lambda: graph_digest(var, positions, False))
        fetch = var.numpy
        sums, sample = (tf.function(lambda: cheap_digest(var, positions, True)),
                        tf.function(lambda: cheap_digest(var, positions, False)))
        run_wide, run_narrow = (lambda: [t.numpy() for t in wide()]), (lambda: [t.numpy() for t in narrow()])
        run_sums, run_sample = (lambda: [t.numpy() for t in sums()]), (lambda: [t.numpy() for t in sample()])
        one = tf.function(lambda: tf.reduce_sum(var))
        run_pass = lambda: one().numpy()  # noqa: E731
        xla = tf.function(lambda: graph_digest(var, positions, True), jit_compile=True)
        xla32 = tf.function(lambda: narrow_digest(var, positions), jit_compile=True)
        extra = {"xla64": lambda: [t.numpy() for t in xla()], "xla32": lambda: [t.numpy() for t in xla32()]}
    else:  # TF 1.15: graph and Session
        var = tf.compat.v1.Variable(value)
        wide_ops, narrow_ops = graph_digest(var, positions, True), graph_digest(var, positions, False)
        session = tf.compat.v1.Session()
        session.run(var.initializer)
        fetch = lambda: session.run(var)  # noqa: E731
        sums_ops, sample_ops = cheap_digest(var, positions, True), cheap_digest(var, positions, False)
        run_wide, run_narrow = (lambda: session.run(wide_ops)), (lambda: session.run(narrow_ops))
        run_sums, run_sample = (lambda: session.run(sums_ops)), (lambda: session.run(sample_ops))
        one = tf.reduce_sum(var)
        run_pass = lambda: session.run(one)  # noqa: E731
        extra = {}
    return {"fetch": fetch, "numpy": lambda: digest.digest(fetch()),
            "numpy-nocrc": lambda: digest.digest(fetch(), crc=False), "graph64": run_wide, "graph32": run_narrow,
            "sums32": run_sums, "sample": run_sample, "pass": run_pass, **extra}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--elements", type=int, default=24_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    runs = variants(args.elements)
    best: Dict[str, float] = {}
    for round_ in range(args.repeat + 1):  # interleaved; the first round warms up (tracing, allocation)
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            if round_:
                best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
    print("TensorFlow %s, %d float32 elements, %d CPUs, best of %d:" % (tf.__version__, args.elements,
                                                                       os.cpu_count() or 0, args.repeat))
    print("| variant | ms | vs numpy |\n|---|---|---|")
    for name, took in best.items():
        print("| %s | %.1f | %.2fx |" % (name, 1e3 * took, took / best["numpy"]))


if __name__ == "__main__":
    main()
