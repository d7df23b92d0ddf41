"""Evidence for the verdict on long goldens (tf2/verdict.py): 200-step recordings of a ReLU MLP,
a conv net with max-pooling and dropout, and an LSTM (tools/goldens/long_models.py, on the
legacy environment), each checked with its correct port and with slips that only appear late
(tools/ports/long_models.py).

For each golden and port it prints: the plain verdict (the port from its own state at the default
tolerance, today's check without make_port), the judged verdict (check(make_port=...), no
tolerance given), where it failed, which view decided, the steps the float64 arbiter judged and
what each cost, and the seconds each check took (each on a fresh port, tracing included).
Wall-clock seconds are this machine's; rerun:

    .venv/bin/python tools/long_goldens.py [--steps 200] [--out build/long] [--only mlp,conv,lstm] [--markdown]
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SLIPS = {"mlp": ("nudge", "schedule", "decay"), "conv": ("nudge",), "lstm": ("nudge",)}


def record(model: str, steps: int, out: str) -> str:
    path = os.path.join(out, "%s-%d.h5" % (model, steps))
    if not os.path.exists(path):
        env = {k: v for k, v in os.environ.items() if k != "TF2_BEHAVIOR"}  # TF2's export turns TF 1.15 eager
        subprocess.run([os.path.join(ROOT, ".venv-legacy", "bin", "python"),
                        os.path.join(ROOT, "tools", "goldens", "long_models.py"), path, "--model", model,
                        "--steps", str(steps)], check=True, env=env, stdout=subprocess.DEVNULL)
    return path


def row(golden: str, model: str, slip: "str | None") -> list:
    import tracekit.tf2
    from tools.ports import long_models

    make = functools.partial(long_models.MAKERS[model], slip)
    made = make()
    start = time.perf_counter()
    plain = tracekit.tf2.check(golden, made[1], model=made[0], **(made[2] if len(made) > 2 else {}))
    plain_seconds = time.perf_counter() - start
    start = time.perf_counter()
    judged = tracekit.tf2.check(golden, make_port=make)
    seconds = time.perf_counter() - start
    arbitrated = judged.arbitration.steps if judged.arbitration is not None else []
    first = judged.first_divergence
    drift = judged.drift
    where = "step %d, %s" % (first.step, first.key) if first is not None else (
        "drift: step %d, %s" % (drift.first_divergence.step, drift.first_divergence.key)
        if drift is not None and drift.first_divergence is not None else "-")
    costs = ", ".join("%d: %s %.1f s" % (a.step, a.side or a.verdict, a.seconds) for a in arbitrated) or "-"
    return [model, slip or "correct", "MATCH" if plain.ok else "step %d" % plain.first_divergence.step,
            "MATCH" if judged.ok else "MISMATCH", where, _decided(judged), costs, "%.1f" % plain_seconds,
            "%.1f" % seconds, "%.1fx" % (seconds / plain_seconds)]


def _decided(result) -> str:
    from tracekit.report.judged import decided_by

    return decided_by(result) if result.judged == "local" else "plain"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--out", default=os.path.join(ROOT, "build", "long"))
    parser.add_argument("--only", default="mlp,conv,lstm")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    head = ["model", "port", "plain (default tolerance)", "judged", "first failure", "decided by",
            "arbitrated steps (step: side, cost)", "plain in (s)", "judged in (s)", "judged / plain"]
    rows = []
    for model in args.only.split(","):
        golden = record(model, args.steps, args.out)
        for slip in (None,) + SLIPS[model]:
            rows.append(row(golden, model, slip))
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    if args.markdown:
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        print("\n".join("| " + " | ".join(r) + " |" for r in rows))
    else:
        from tracekit.report.text import table

        print("\n".join(table(head, rows)))


if __name__ == "__main__":
    main()
