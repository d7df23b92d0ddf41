"""Recording overhead: a tf_slim resnet_v1_50 training loop with and without tracekit.

Runs in the legacy environment (TF 1.15.5). The same loop (64x64 inputs, batch 8,
10 classes, SGD with momentum: 47M values of variables and slots) runs, each in its
own process and graph, after warm-up steps:

    plain        the loop alone
    full         recorded by tracekit, everything every step
    every10      recorded by tracekit with every=10
    fetch        floor: the loop also fetches what a full capture needs (gradients in
                 the step's run, all variables after it) and throws it away
    fetch+write  floor: as fetch, and writes those raw bytes to a file, unchecked and
                 uncompressed: the least any recorder storing them pays
    fetch+write/10  the same floor every 10th step, to compare with every10

    .venv-legacy/bin/python tools/bench_record.py [--steps 30] [--repeat 2]

Prints seconds per step over all timed steps (finishing the golden included) and in the
steady state (the last 20 steps, without the one-off costs: TensorFlow builds an executor
for every new set of fetches, ~1 s each for this graph); the warm-up steps are never timed.
Each variant runs --repeat times, interleaved; the table shows the best run, the spread
over the runs ((max - min) / min) and the ratios. The targets are stated against the floor
measured in the same run, since on 2 cores fetching and writing a full step's raw bytes
already costs a multiple of the plain loop: full capture <= 1.1x fetch+write, every10
<= 1.1x the plain loop (steady state). A benchmark, not a timed test.
"""

from __future__ import print_function

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = ("plain", "full", "every10", "fetch", "fetch+write", "fetch+write/10")
STEADY = 20  # the last steps, a multiple of 10 so every10's full steps are counted fairly


def child(variant, steps, warmup, out):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, HERE)
    import tensorflow as tf
    import tracekit.tf1
    from resnet_data import batches, build

    data = batches()
    times = []
    with tf.Graph().as_default():
        images, labels, loss, train, grads_and_vars, _ = build()
        variables = tf.compat.v1.global_variables()
        grads = [g for g, _ in grads_and_vars]
        feeds = [dict(zip((images, labels), next(data))) for _ in range(steps + warmup)]
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            for k in range(warmup):  # graph optimization and allocation happen here, not in the timing
                sess.run(train, feeds[k])

            def loop(step):
                for k in range(warmup, warmup + steps):
                    t = time.time()
                    step(feeds[k])
                    times.append(time.time() - t)

            def fetch(feed):
                got = sess.run([train, loss, grads], feed)
                return got[2] + sess.run(variables)

            start = time.time()
            if variant == "plain":
                loop(lambda feed: sess.run([train, loss], feed))
            elif variant == "fetch":
                loop(fetch)
            elif variant.startswith("fetch+write"):
                every = 10 if variant.endswith("/10") else 1
                count = [0]

                def fetch_write(feed):
                    if count[0] % every:
                        sess.run([train, loss], feed)
                    else:
                        for value in fetch(feed):
                            value.tofile(f)
                    count[0] += 1
                with open(out, "wb") as f:
                    loop(fetch_write)
            else:
                with tracekit.tf1.record(out, every=1 if variant == "full" else 10) as rec:
                    rec.session(sess)
                    loop(lambda feed: sess.run([train, loss], feed))
            elapsed = time.time() - start
    size = os.path.getsize(out) if os.path.exists(out) else 0
    return {"variant": variant, "seconds_per_step": elapsed / steps, "steady": sum(times[-STEADY:]) / STEADY,
            "golden_bytes": size}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="runs per variant; the fastest is reported, "
                        "with the spread over all")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        out = os.path.join(tempfile.mkdtemp(prefix="bench-record-"), "trace.h5")
        try:
            print(json.dumps(child(args.child, args.steps, args.warmup, out)))
        finally:
            if os.path.exists(out):
                os.remove(out)
        return
    if args.steps < STEADY:
        parser.error("--steps must be at least %d (the steady-state window)" % STEADY)
    runs = {variant: [] for variant in VARIANTS}
    for rep in range(args.repeat):
        for variant in VARIANTS:  # interleaved, so drift hits every variant alike
            print("running %s (%d/%d) ..." % (variant, rep + 1, args.repeat), file=sys.stderr)
            proc = subprocess.run([sys.executable, __file__, "--child", variant, "--steps", str(args.steps),
                                   "--warmup", str(args.warmup)], stdout=subprocess.PIPE, check=True,
                                  universal_newlines=True)
            runs[variant].append(json.loads(proc.stdout.strip().splitlines()[-1]))

    def best(variant, measure):
        return min(r[measure] for r in runs[variant])

    def spread(variant, measure):
        values = [r[measure] for r in runs[variant]]
        return (max(values) - min(values)) / min(values)

    print("| variant | s/step, all | ratio | s/step, steady | ratio | spread, steady | file MB |")
    print("|---|---|---|---|---|---|---|")
    for variant in VARIANTS:
        print("| %s | %.3f | %.2f | %.3f | %.2f | %.0f%% | %.0f |" % (
            variant, best(variant, "seconds_per_step"),
            best(variant, "seconds_per_step") / best("plain", "seconds_per_step"), best(variant, "steady"),
            best(variant, "steady") / best("plain", "steady"), 100 * spread(variant, "steady"),
            max(r["golden_bytes"] for r in runs[variant]) / 1e6))
    print("\nsteady state, against the floors of this run:")
    for variant, floor, target in (("full", "fetch+write", 1.1), ("every10", "plain", 1.1),
                                   ("every10", "fetch+write/10", None)):
        ratio = best(variant, "steady") / best(floor, "steady")
        print("  %s / %s: %.2fx%s" % (variant, floor, ratio, "" if target is None else " (target <= %.2fx: %s)"
                                     % (target, "met" if ratio <= target else "not met")))
    print("(%d steps of tf_slim resnet_v1_50 after %d warm-up steps; steady: the last %d; best of %d, %d CPUs)"
          % (args.steps, args.warmup, STEADY, args.repeat, os.cpu_count() or 0))


if __name__ == "__main__":
    main()
