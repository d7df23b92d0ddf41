"""Real-size benchmark: a synthetic model of BERT-base's size (110M parameters, Adam) recorded on
TF 1.15 under a size budget, its TF2 port checked against the golden, each run in its own
process, timed from outside the training loop (graph building and tracing included), with
its peak resident memory:

    record-floor   the legacy training loop, no recorder
    record         the same, recorded by tracekit under --budget (keyframes and digests planned)
    plain          the TF2 port's loop on the golden's inputs (read before timing)
    check          tracekit.tf2.check: the port replayed and compared as it runs, nothing written
    wrong          check of the port made wrong at step 23 (its gradients doubled): where it is caught
    replay         tracekit.tf2.replay, writing the actual trace (digests where the golden has them)
    compare        tracekit.compare of the golden with that actual trace
    read-floor     reading both traces' every value and digest, nothing compared: compare's floor

    .venv/bin/python tools/bench_big.py [--params 110e6] [--steps 100] [--budget 1GB] [--out build/big]
        [--markdown] [--reuse]      # --reuse: the recordings' figures and golden of the last run

The port is checked at Tolerance.training() with the cross-machine round-off bound at step 0 as
well (what Tolerance.gpu() gives): a 23-block model's logits carry 18 ulps of round-off at step 0
between TF 1.15 and TF 2.21 with oneDNN, beyond the guide's atol of 1e-5 at their scale of 18.

Prints a table (or markdown): seconds, ratio to its floor (record: record-floor; check, replay:
plain; compare: read-floor), peak memory, the golden's size against the budget. A benchmark,
not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LEGACY = os.path.join(ROOT, ".venv-legacy", "bin", "python")
MODERN = os.path.join(ROOT, ".venv", "bin", "python")
SLIP_AT = 23


def child(variant: str, golden: str, actual: str, inner: int) -> Dict[str, Any]:
    """One variant, in this process; returns its figures."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    sys.path.insert(0, ROOT)
    import tracekit

    out: Dict[str, Any] = {}
    start = time.time()
    if variant == "read-floor":
        for path in (golden, actual):
            with tracekit.open(path) as trace:
                for step in [trace.initial] + list(trace):
                    for key in step:
                        step[key]
                    step.digests
                    trace.refresh()
    elif variant == "compare":
        result = tracekit.compare(golden, actual, tolerance=_tolerance())
        out["ok"] = result.ok
    else:
        import tensorflow as tf

        import tracekit.tf2
        from tools.ports import big_model

        if variant == "plain":
            with tracekit.open(golden) as trace:
                feeds = [{n: tf.constant(s["input", n]) for n in s.names("input")} for s in trace]
            start = time.time()
            _, step = big_model.make(inner)
            for feed in feeds:
                step(feed)
        elif variant == "replay":
            model, step = big_model.make(inner)
            tracekit.tf2.replay(golden, step, model=model, out=actual).close()
        else:
            slip = "scale" if variant == "wrong" else None
            model, step = big_model.make(inner, slip, SLIP_AT)
            result = tracekit.tf2.check(golden, step, model=model, tolerance=_tolerance())
            first = result.first_divergence
            out.update(ok=result.ok, first=None if first is None else [first.step, first.key, first.stats.basis])
    out.update(seconds=time.time() - start, peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)
    return out


def _tolerance() -> Any:
    import tracekit

    return tracekit.Tolerance.gpu()  # training, and the round-off bound at step 0 (see the module's note)


def run(command: list) -> Dict[str, Any]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    env.pop("TF2_BEHAVIOR", None)
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          cwd=ROOT)
    if done.returncode:
        raise SystemExit("%s failed:\n%s" % (" ".join(command), done.stderr[-3000:]))
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", default="110e6")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--budget", default="1GB")
    parser.add_argument("--out", default=os.path.join(ROOT, "build", "big"))
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--reuse", action="store_true", help="keep the last run's recordings (their figures too)")
    parser.add_argument("--child", nargs=4, metavar=("VARIANT", "GOLDEN", "ACTUAL", "INNER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        variant, golden, actual, inner = args.child
        print(json.dumps(child(variant, golden, actual, int(inner))))
        return
    os.makedirs(args.out, exist_ok=True)
    golden, actual = os.path.join(args.out, "golden.h5"), os.path.join(args.out, "actual.h5")
    script = os.path.join(ROOT, "tools", "goldens", "big_model.py")
    common = ["--params", args.params, "--steps", str(args.steps)]
    rows: Dict[str, Dict[str, Any]] = {}
    recorded = os.path.join(args.out, "recorded.json")
    if args.reuse and os.path.exists(recorded) and os.path.exists(golden):
        with open(recorded) as fh:
            rows.update(json.load(fh))
    else:
        rows["record-floor"] = run([LEGACY, script, "-"] + common)
        rows["record"] = run([LEGACY, script, golden, "--budget", args.budget] + common)
        for row in rows.values():
            row["seconds"] = row["total_s"]
        with open(recorded, "w") as fh:
            json.dump(rows, fh)
    inner = rows["record"]["inner"]
    for variant in ("plain", "check", "wrong", "replay", "compare", "read-floor"):
        rows[variant] = run([MODERN, __file__, "--child", variant, golden, actual, str(inner)])
    floors = {"record": "record-floor", "check": "plain", "wrong": "plain", "replay": "plain",
              "compare": "read-floor"}
    import tracekit
    from tracekit.record.keyframes import parse_size

    with tracekit.open(golden) as trace:
        plan = trace.meta["recording"]["keyframes"]
    size, budget = os.path.getsize(golden), parse_size(args.budget)
    head = ("%d parameters (3 blocks %d wide), %d steps; golden %.0f MB of a %.0f MB budget (%.2f), keyframes every %s "
            "keeping %s whole; an actual trace of %.0f MB" % (
                rows["record"]["params"], inner, args.steps, size / 1e6, budget / 1e6, size / budget,
                plan["every"], ", ".join(plan["whole"]), os.path.getsize(actual) / 1e6))
    lines = [head, ""]
    table = [["variant", "seconds", "vs floor", "peak memory", "result"]]
    for name, row in rows.items():
        floor = floors.get(name)
        ratio = "%.2fx %s" % (row["seconds"] / rows[floor]["seconds"], floor) if floor else "-"
        result = row.get("first") or ("ok" if row.get("ok") else "-" if "ok" not in row else "MISMATCH")
        table.append([name, "%.1f" % row["seconds"], ratio, "%.0f MB" % row["peak_rss_mb"], str(result)])
    if args.markdown:
        lines += ["| " + " | ".join(r) + " |" for r in table[:1]] + ["|" + "---|" * len(table[0])]
        lines += ["| " + " | ".join(r) + " |" for r in table[1:]]
    else:
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in table]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
