"""A BERT-base-shaped model, not chosen to pass: google-research/bert (bert-tensorflow, the corpus'
bert_classifier driver, tools/corpus/programs) at BERT-base's shape (12 layers, hidden 768, 12
heads, intermediate 3072 with GELU, LayerNorm, dropout on, a 30,522-word vocabulary and 512
positions: 110M parameters), fine-tuned by its AdamWeightDecayOptimizer (decoupled weight decay,
no bias correction) at run_classifier's learning rate 5e-5; recorded on TF 1.15 under a size
budget with no step count given, and checked through the corpus' hand-written TF2 port
(tools/corpus/ports/bert_classifier.py), right and with two slips. Each variant is a process of
its own, timed whole from outside (imports, graph building, tracing included: what CI pays),
with its peak resident memory:

    record-floor  the driver alone on TF 1.15
    record        the same under `tracekit record --budget`
    plain         the TF2 port's loop on the golden's inputs, nothing else
    check         tracekit.tf2.check(golden, make_port=...): judged by the envelope (the golden keeps
                  its state whole only at the start)
    decay         check of the port with the weight decay left out
    nudge         check of the port that moves one word embedding by 1e-3 in step 7, once

    .venv/bin/python tools/bench_bert.py [--steps 100] [--budget 1GB] [--seq 16] [--batch 2]
        [--layers 12] [--out build/bert] [--only record-floor,record,...] [--reuse]

Prints a markdown table: seconds, the ratio to its floor (record: record-floor; the checks: plain),
peak memory, and what each check found. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LEGACY = os.path.join(ROOT, ".venv-legacy", "bin", "python")
MODERN = os.path.join(ROOT, ".venv", "bin", "python")
DRIVER = os.path.join(ROOT, "tools", "corpus", "programs", "bert_classifier.py")
VARIANTS = ("record-floor", "record", "plain", "check", "decay", "nudge")
BASE = dict(hidden=768, heads=12, intermediate=3072, vocab=30522, positions=512, lr=5e-5)


def sizes(args: argparse.Namespace) -> Dict[str, Any]:
    return dict(BASE, layers=args.layers, seq=args.seq)


def driver_args(args: argparse.Namespace) -> List[str]:
    """The driver's options: the shape, the batch, BERT's rate constant over the run (its decay
    spread over 1e9 steps, no warm-up: see tools/corpus)."""
    out = ["--steps", str(args.steps), "--train-steps", "1000000000", "--warmup", "0", "--batch", str(args.batch)]
    for name, value in sizes(args).items():
        out += ["--" + name, str(value)]
    return out


def timed(command: List[str]) -> Tuple[float, float, str]:
    """(seconds, peak resident MB, stdout) of one process."""
    env = {k: v for k, v in os.environ.items() if k != "TF2_BEHAVIOR"}
    env.update(PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", TF_USE_LEGACY_KERAS="1")
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    text = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)  # reaped here, for this child's own peak memory
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(command), proc.returncode, text[-4000:]))
    return seconds, usage.ru_maxrss / 1024.0, text


def child(variant: str, golden: str, sizes_json: str) -> None:
    """The TF2 variants, in this process: prints one JSON line of what they found."""
    import resource

    import tracekit
    import tracekit.tf2
    from tools.corpus.ports import bert_classifier

    shape = json.loads(sizes_json)
    tf = tracekit.tf2.tf
    out: Dict[str, Any] = {}
    if variant == "plain":
        with tracekit.open(golden) as trace:
            feeds = [{n: tf.constant(s["input", n]) for n in s.names("input")} for s in trace]
        _, step, _ = bert_classifier.port(tf, **shape)
        for feed in feeds:
            step(feed)
    else:
        slip = None if variant == "check" else variant

        def factory() -> Any:
            variables, step, options = bert_classifier.port(tf, slip=slip, **shape)
            return None, step, dict(options, variables=variables)
        result = tracekit.tf2.check(golden, make_port=factory)
        first = result.first_divergence
        out = {"ok": result.ok, "judged": result.judged,
               "first": None if first is None else [first.step, first.key]}
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--budget", default="1GB")
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--out", default=os.path.join(ROOT, "build", "bert"))
    parser.add_argument("--only", default=",".join(VARIANTS))
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    os.makedirs(args.out, exist_ok=True)
    golden = os.path.join(args.out, "bert-base.h5")
    rows: Dict[str, Dict[str, Any]] = {}
    for variant in args.only.split(","):
        print("%s ..." % variant, file=sys.stderr, flush=True)
        if variant == "record-floor":
            command = [LEGACY, DRIVER] + driver_args(args)
        elif variant == "record":
            command = [LEGACY, "-m", "tracekit", "record", "--budget", args.budget, "-o", golden, "--", DRIVER] \
                + driver_args(args)
        else:
            command = [MODERN, __file__, "--child", variant, golden, json.dumps(sizes(args))]
        seconds, peak, text = timed(command)
        found: Dict[str, Any] = json.loads(text.strip().splitlines()[-1]) if variant not in (
            "record-floor", "record") else {}
        rows[variant] = dict(found, seconds=seconds, peak_mb=found.get("peak_rss_mb", peak))
        print("%s: %.1f s, %.0f MB %s" % (variant, seconds, rows[variant]["peak_mb"], found), file=sys.stderr, flush=True)
    size = os.path.getsize(golden) if os.path.exists(golden) else None
    print("BERT-base shape (%s), %d steps, batch %d x %d tokens, budget %s: golden %s"
          % (", ".join("%s %s" % kv for kv in sizes(args).items()), args.steps, args.batch, args.seq, args.budget,
             "%.0f MB" % (size / 1e6) if size else "-"))
    print("\n| variant | seconds | vs its floor | peak memory | found |\n|---|---|---|---|---|")
    floors = {"record": "record-floor", "check": "plain", "decay": "plain", "nudge": "plain"}
    for variant, row in rows.items():
        floor = rows.get(floors.get(variant, ""))
        ratio = "%.2fx %s" % (row["seconds"] / floor["seconds"], floors[variant]) if floor else "-"
        found = "-" if "ok" not in row else ("MATCH" if row["ok"] else "step %s, `%s`" % tuple(row["first"])) + \
            " (%s)" % row["judged"]
        print("| %s | %.1f | %s | %.1f GB | %s |" % (variant, row["seconds"], ratio, row["peak_mb"] / 1024, found))


if __name__ == "__main__":
    main()
