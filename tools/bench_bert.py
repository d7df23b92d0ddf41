"""A BERT-base-shaped model, not chosen to pass: google-research/bert (bert-tensorflow, the corpus'
bert_classifier driver, tools/corpus/programs) at BERT-base's shape (12 layers, hidden 768, 12
heads, intermediate 3072 with GELU, LayerNorm, dropout on, a 30,522-word vocabulary and 512
positions: 110M parameters), fine-tuned by its AdamWeightDecayOptimizer (decoupled weight decay,
no bias correction) at run_classifier's learning rate 5e-5; recorded on TF 1.15 under a size
budget with no step count given, and checked through the corpus' hand-written TF2 port
(tools/corpus/ports/bert_classifier.py), right and with three slips. Each variant is a process of
its own, timed whole from outside (imports, graph building, tracing included: what CI pays),
with its peak memory (the process and the children it forks: tools/treemem.py):

    record-floor  the driver alone on TF 1.15
    record        the same under `tracekit record --budget`
    plain         the TF2 port's loop on the golden's inputs, nothing else
    check         tracekit.tf2.check(golden, make_port=...): judged by the envelope (the golden keeps
                  its state whole only at the start)
    decay         check of the port with the decoupled weight decay left out (from step 0)
    late          check of the port whose rate schedule runs one step late once its counter reads 20
    scale         check of the port that scales the first encoder layer's weights by 1 + 1e-3 in step 7

    .venv/bin/python tools/bench_bert.py [--steps 100] [--budget 1GB] [--seq 16] [--batch 2]
        [--layers 12] [--train-steps 1000] [--out build/bert] [--only record-floor,record,...]

Prints a markdown table: seconds, the ratio to its floor (record: record-floor; the checks: plain),
peak memory, and what each check found. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LEGACY = os.path.join(ROOT, ".venv-legacy", "bin", "python")
MODERN = os.path.join(ROOT, ".venv", "bin", "python")
DRIVER = os.path.join(ROOT, "tools", "corpus", "programs", "bert_classifier.py")
sys.path.insert(0, ROOT)
from tools import treemem  # noqa: E402
VARIANTS = ("record-floor", "record", "plain", "check", "decay", "late", "scale")
BASE = dict(hidden=768, heads=12, intermediate=3072, vocab=30522, positions=512, lr=5e-5)


def sizes(args: argparse.Namespace) -> Dict[str, Any]:
    return dict(BASE, layers=args.layers, seq=args.seq)


def driver_args(args: argparse.Namespace) -> List[str]:
    """The driver's options: the shape, the batch, BERT's polynomial decay of the rate to 0 over
    --train-steps and no warm-up (a warm-up's rate is 0 at step 0, where nothing could show a
    decay left out). The rate moves at every step: BERT's optimizer reads global_step unordered
    with its increment, so TF 1.15 trained with the rate of the next step at some steps and of
    the step itself at others; the golden keeps which with each step, and a replay feeds it."""
    out = ["--steps", str(args.steps), "--train-steps", str(args.train_steps), "--warmup", "0",
           "--batch", str(args.batch)]
    for name, value in sizes(args).items():
        out += ["--" + name, str(value)]
    return out


def timed(command: List[str]) -> Tuple[float, float, str]:
    """(seconds, peak memory MB, output) of one process and the children it forks (a judged
    check runs each port in one): the peak of their summed proportional set sizes (treemem)."""
    env = {k: v for k, v in os.environ.items() if k != "TF2_BEHAVIOR"}
    env.update(PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", TF_USE_LEGACY_KERAS="1")
    with tempfile.TemporaryFile() as output:
        found = treemem.measure(command, env=env, cwd=ROOT, output=output)
        output.seek(0)
        text = output.read().decode(errors="replace")
    if found.returncode:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(command), found.returncode, text[-4000:]))
    return found.seconds, found.peak_pss_mb, text


def child(variant: str, golden: str, sizes_json: str) -> None:
    """The TF2 variants, in this process: prints one JSON line of what they found."""
    import tracekit
    import tracekit.tf2
    from tools.corpus.ports import bert_classifier

    shape = json.loads(sizes_json)
    train_steps = shape.pop("train_steps")
    tf = tracekit.tf2.tf
    out: Dict[str, Any] = {}
    if variant == "plain":
        with tracekit.open(golden) as trace:
            feeds = [{n: tf.constant(s["input", n]) for n in s.names("input")} for s in trace]
        _, step, _ = bert_classifier.port(tf, train_steps=train_steps, **shape)
        for feed in feeds:
            step(feed)
    else:
        slip = None if variant == "check" else variant

        def factory() -> Any:
            variables, step, options = bert_classifier.port(tf, slip=slip, train_steps=train_steps, **shape)
            return None, step, dict(options, variables=variables)
        result = tracekit.tf2.check(golden, make_port=factory)
        first = result.first_divergence
        out = {"ok": result.ok, "judged": result.judged,
               "first": None if first is None else [first.step, first.key],
               "named": ["%s on %d variables" % (f.code, len(f.keys)) for f in result.fingerprints],
               "expected": expected(golden, slip)}
    print(json.dumps(out))


def expected(golden: str, slip: Any) -> Any:
    """The step a slip takes effect: the decay's at step 0; "scale" and "late" where the port's
    step counter first reads NUDGE_AT or LATE_FROM, which a replay moves a step on where TF1's racy
    read of it did (the golden keeps that read with each step)."""
    import tracekit
    from tools.corpus.ports import bert_classifier
    from tracekit.keys import COUNTER_READS

    at = {"decay": 0, "scale": bert_classifier.NUDGE_AT, "late": bert_classifier.LATE_FROM}.get(slip)
    if not at:
        return at
    with tracekit.open(golden) as trace:
        for k in range(len(trace)):
            if k + sum((trace.step(k).info.get(COUNTER_READS) or {}).values()) >= at:
                return k
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--budget", default="1GB")
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--train-steps", type=int, default=1000,
                        help="the steps BERT's rate decays to 0 over (1e9: a constant rate)")
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
            shape = json.dumps(dict(sizes(args), train_steps=args.train_steps))
            command = [MODERN, __file__, "--child", variant, golden, shape]
        seconds, peak, text = timed(command)
        found: Dict[str, Any] = json.loads(text.strip().splitlines()[-1]) if variant not in (
            "record-floor", "record") else {}
        rows[variant] = dict(found, seconds=seconds, peak_mb=peak)
        print("%s: %.1f s, %.0f MB %s" % (variant, seconds, peak, found), file=sys.stderr, flush=True)
    size = os.path.getsize(golden) if os.path.exists(golden) else None
    held = "-"
    if size:  # a budget with no step count ends the recording where it is full: say how many it held
        import tracekit
        with tracekit.open(golden) as trace:
            held = "%.0f MB, %d steps" % (size / 1e6, len(trace))
    print("BERT-base shape (%s), %d steps, batch %d x %d tokens, budget %s: golden %s"
          % (", ".join("%s %s" % kv for kv in sizes(args).items()), args.steps, args.batch, args.seq, args.budget, held))
    print("\n| variant | seconds | vs its floor | peak memory | found |\n|---|---|---|---|---|")
    floors = dict({"record": "record-floor"}, **{name: "plain" for name in ("check", "decay", "late", "scale")})
    for variant, row in rows.items():
        floor = rows.get(floors.get(variant, ""))
        ratio = "%.2fx %s" % (row["seconds"] / floor["seconds"], floors[variant]) if floor else "-"
        found = "-" if "ok" not in row else ("MATCH" if row["ok"] else "step %s, `%s`" % tuple(row["first"])) + \
            " (%s)" % "; ".join([row["judged"]] + row.get("named", []) + (
                ["its step %s" % row["expected"]] if row.get("expected") is not None else []))
        print("| %s | %.1f | %s | %.1f GB | %s |" % (variant, row["seconds"], ratio, row["peak_mb"] / 1024, found))


if __name__ == "__main__":
    main()
