"""Recording overhead: a tf_slim resnet_v1_50 training loop with and without tracekit.

Runs in the legacy environment (TF 1.15.5). The same loop (64x64 inputs, batch 8,
10 classes, SGD with momentum: 47M values of variables and slots) runs plain,
recorded in full every step, and recorded with every=10, each in its own process
and graph, after warm-up steps; the time includes finishing the golden.

    .venv-legacy/bin/python tools/bench_record.py [--steps 20] [--repeat 2]

Prints the seconds per step and the ratios to the plain loop (targets: <= 1.25 in
full, <= 1.05 with every=10). A benchmark, not a timed test.
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
VARIANTS = ("plain", "full", "every10")


def child(variant, steps, warmup, out):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, HERE)
    import tensorflow as tf
    import tracekit.tf1
    from resnet_data import batches, build

    data = batches()
    with tf.Graph().as_default():
        images, labels, loss, train, _, _ = build()
        feeds = [dict(zip((images, labels), next(data))) for _ in range(steps + warmup)]
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            for k in range(warmup):  # graph optimization and allocation happen here, not in the timing
                sess.run(train, feeds[k])
            start = time.time()
            if variant == "plain":
                for k in range(warmup, warmup + steps):
                    sess.run([train, loss], feeds[k])
            else:
                with tracekit.tf1.record(out, every=1 if variant == "full" else 10) as rec:
                    rec.session(sess)
                    for k in range(warmup, warmup + steps):
                        sess.run([train, loss], feeds[k])
            elapsed = time.time() - start
    size = os.path.getsize(out) if variant != "plain" else 0
    return {"variant": variant, "seconds_per_step": elapsed / steps, "golden_bytes": size}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2, help="runs per variant; the fastest is reported")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        out = os.path.join(tempfile.mkdtemp(prefix="bench-record-"), "trace.h5")
        print(json.dumps(child(args.child, args.steps, args.warmup, out)))
        if os.path.exists(out):
            os.remove(out)
        return
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
    plain = best["plain"]["seconds_per_step"]
    print("| variant | s/step | ratio to plain | golden MB |")
    print("|---|---|---|---|")
    for variant in VARIANTS:
        r = best[variant]
        print("| %s | %.3f | %.2f | %.0f |" % (variant, r["seconds_per_step"], r["seconds_per_step"] / plain,
                                               r["golden_bytes"] / 1e6))
    print("\ntargets: full <= 1.25, every=10 <= 1.05 (%d steps of tf_slim resnet_v1_50, best of %d)"
          % (args.steps, args.repeat))


if __name__ == "__main__":
    main()
