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

Prints seconds per step and ratios to the plain loop, over all steps (finishing the
golden included) and in the steady state (the last 20 steps, without the one-off
costs: TensorFlow builds an executor for every new set of fetches, ~1 s each for this
graph). Targets: <= 1.25 in full, <= 1.05 with every=10. A benchmark, not a timed test.
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
    parser.add_argument("--repeat", type=int, default=2, help="runs per variant; the fastest is reported")
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
    best = {}
    for rep in range(args.repeat):
        for variant in VARIANTS:  # interleaved, so drift hits every variant alike
            print("running %s (%d/%d) ..." % (variant, rep + 1, args.repeat), file=sys.stderr)
            proc = subprocess.run([sys.executable, __file__, "--child", variant, "--steps", str(args.steps),
                                   "--warmup", str(args.warmup)], stdout=subprocess.PIPE, check=True,
                                  universal_newlines=True)
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            if variant not in best or result["seconds_per_step"] < best[variant]["seconds_per_step"]:
                best[variant] = result
    plain = best["plain"]
    print("| variant | s/step, all | ratio | s/step, steady | ratio | file MB |")
    print("|---|---|---|---|---|---|")
    for variant in VARIANTS:
        r = best[variant]
        print("| %s | %.3f | %.2f | %.3f | %.2f | %.0f |" % (
            variant, r["seconds_per_step"], r["seconds_per_step"] / plain["seconds_per_step"], r["steady"],
            r["steady"] / plain["steady"], r["golden_bytes"] / 1e6))
    print("\ntargets: full <= 1.25, every10 <= 1.05 (%d steps of tf_slim resnet_v1_50, steady: the last %d; "
          "best of %d)" % (args.steps, STEADY, args.repeat))


if __name__ == "__main__":
    main()
