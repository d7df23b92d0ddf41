"""The judged check on a generated family of long TF1 training runs (tools/family_spec.py):
every correct port must MATCH and every wrong port must MISMATCH at its slip's step, under
oneDNN on and off.

It records the family's goldens on TF 1.15 when they are missing (tools/goldens/family.py, on
.venv-legacy), then, in one child process per oneDNN setting (TF_ENABLE_ONEDNN_OPTS is read at
TensorFlow's import), checks each run's correct port (tools/ports/family.py) with the plain
check (its own state, default tolerance) and the judged one (tracekit.tf2.check with make_port,
no tolerance), and its wrong port judged. Results go to OUT/results-onednn<0|1>.jsonl, one line
per port and setting (a rerun skips those written); the table and a last line
"family: ... false failures ..., slips found at their step ..." are printed. Exit 1 on any false
failure or slip not found at its step.

    .venv/bin/python tools/family.py [--out DIR] [--size 24] [--steps N] [--onednn 1,0] [--roundoff ULPS]
        [--every K] [--only NAME,...] [--markdown]

--every K records the goldens whole only after every K-th step and as digests between (made in
the TF1 graph), as a real-size model is recorded under a budget: the judged check is then the
drift view alone (verdict.judge_keyframed), its step 0 held tight on the sample.

Wall-clock seconds are this machine's (2 threads by default: TF_NUM_*_THREADS are not set).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tools import family_spec as spec  # noqa: E402


def record(args: argparse.Namespace) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TF2_BEHAVIOR"}  # TF2's export turns TF 1.15 eager
    subprocess.run([os.path.join(ROOT, ".venv-legacy", "bin", "python"), os.path.join(ROOT, "tools", "goldens",
                    "family.py"), args.out, "--size", str(args.size), "--steps", str(args.steps), "--only", args.only,
                    "--roundoff", str(args.roundoff), "--every", str(args.every)], check=True, env=env)


def _arbitrated(result: Any) -> List[Dict[str, Any]]:
    steps = result.arbitration.steps if result.arbitration is not None else []
    drift = result.drift.arbitration.steps if result.drift is not None and result.drift.arbitration else []
    return [{"step": a.step, "verdict": a.verdict, "side": a.side, "reproduced": a.reproduced,
             "by_update": list(a.by_update), "seconds": round(a.seconds, 2), "view": view}
            for view, found in (("local", steps), ("drift", drift)) for a in found]


def check(run: spec.Run, golden: str, slip: bool, roundoff: float) -> Dict[str, Any]:
    """One port of `run` judged (and the correct one also checked plain), as a result line."""
    import tracekit.tf2
    from tools.ports import family

    make = functools.partial(family.make_port, run, slip, roundoff)
    line: Dict[str, Any] = {"run": run.name, "port": "slip" if slip else "correct", "slip": run.slip,
                            "slip_at": run.slip_at}
    if not slip:
        model, step = make()
        start = time.perf_counter()
        plain = tracekit.tf2.check(golden, step, model=model)
        line["plain_seconds"] = round(time.perf_counter() - start, 2)
        line["plain"] = None if plain.ok else plain.first_divergence.step
    start = time.perf_counter()
    result = tracekit.tf2.check(golden, make_port=make)
    line["seconds"] = round(time.perf_counter() - start, 2)
    first = result.first_divergence
    drift = result.drift.first_divergence if result.drift is not None else None
    line.update(ok=result.ok, judged=result.judged, step=None if first is None else first.step,
                key=None if first is None else first.key, drift=None if drift is None else [drift.step, drift.key],
                arbitrated=_arbitrated(result))
    if not result.ok and not slip:
        line["report"] = result.report()[:4000]
    return line


def child(args: argparse.Namespace) -> None:
    path = os.path.join(args.out, "results-onednn%s.jsonl" % os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1"))
    done = set()
    if os.path.exists(path):
        with open(path) as f:
            done = {(d["run"], d["port"]) for d in map(json.loads, f)}
    only = set(filter(None, args.only.split(",")))
    for run in spec.family(args.size, args.steps):
        if only and run.name not in only:
            continue
        for slip in (False, True):
            if (run.name, "slip" if slip else "correct") in done:
                continue
            line = check(run, os.path.join(args.out, run.name + ".h5"), slip, args.roundoff)
            line["onednn"] = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1")
            with open(path, "a") as f:
                f.write(json.dumps(line) + "\n")
            print("%s %s: %s%s, %.1f s" % (run.name, line["port"], "MATCH" if line["ok"] else "MISMATCH",
                                            "" if line["ok"] else " at step %s (%s)" % (line["step"], line["key"]),
                                            line["seconds"]), file=sys.stderr, flush=True)


def verdicts(lines: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The false failures and the slips found at their step, counted over `lines`."""
    correct = [d for d in lines if d["port"] == "correct"]
    slips = [d for d in lines if d["port"] == "slip"]
    return {"correct": len(correct), "false": [d for d in correct if not d["ok"]], "slips": len(slips),
            "found": [d for d in slips if not d["ok"] and d["step"] == d["slip_at"]]}


def _explained(arbitrated: List[Dict[str, Any]]) -> str:
    """The discontinuities the judged check explained in a run, counted by side: "3 (port 2,
    golden 1 of which 1 without taps; update rule 2)"."""
    explained = [a for a in arbitrated if a["verdict"] == "round-off"]
    if not explained:
        return "-"
    sides = {side: sum(a["side"] == side for a in explained) for side in ("port", "golden", "between")}
    parts = ["%s %d" % (side, n) for side, n in sides.items() if n]
    reproduced = sum(a["reproduced"] for a in explained)
    if reproduced:
        parts[[p.split()[0] for p in parts].index("golden")] += " (%d without taps)" % reproduced
    updated = sum(bool(a["by_update"]) for a in explained)
    return "%d: %s%s" % (len(explained), ", ".join(parts), "; update rule %d" % updated if updated else "")


def table(args: argparse.Namespace, lines: List[Dict[str, Any]]) -> List[List[str]]:
    by = {(d["run"], d["port"], d["onednn"]): d for d in lines}
    settings = args.onednn.split(",")
    rows = []
    for run in spec.family(args.size, args.steps):
        if not any((run.name, "correct", s) in by for s in settings):
            continue
        row = [run.name, "%s @ %d" % (run.slip, run.slip_at)]
        for s in settings:
            c, w = by.get((run.name, "correct", s)), by.get((run.name, "slip", s))
            row.append("-" if c is None else "MATCH" if c["ok"] else "MISMATCH %s" % c["step"])
            row.append("-" if w is None else "MATCH (missed)" if w["ok"] else "step %s%s" % (
                w["step"], "" if w["step"] == run.slip_at else " (expected %d)" % run.slip_at))
            row.append(_explained(c["arbitrated"]) if c else "-")
            row.append("-" if c is None else "%.1f / %.1f" % (c["seconds"], c["plain_seconds"]))
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="default: build/family (-roundoff<N>, -every<K> with those)")
    parser.add_argument("--size", type=int, default=spec.SIZE)
    parser.add_argument("--steps", type=int, default=0, help="at most this many steps per run (0: as specified)")
    parser.add_argument("--onednn", default="1,0", help="TF_ENABLE_ONEDNN_OPTS settings, one child each")
    parser.add_argument("--only", default="", help="run names, comma-separated")
    parser.add_argument("--roundoff", type=float, default=0.0,
                        help="ULPS: emulate kernels that round this far apart, on both sides (family_spec)")
    parser.add_argument("--every", type=int, default=1, help="K: goldens whole after every K-th step, digests between")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.out = args.out or os.path.join(ROOT, "build", "family" + ("-roundoff%g" % args.roundoff if args.roundoff
                                                                   else "") + ("-every%d" % args.every if args.every > 1
                                                                               else ""))
    os.makedirs(args.out, exist_ok=True)
    if args.child:
        child(args)
        return
    record(args)
    for setting in args.onednn.split(","):
        subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--out", args.out, "--size",
                        str(args.size), "--steps", str(args.steps), "--only", args.only, "--roundoff",
                        str(args.roundoff)],
                       env=dict(os.environ, TF_ENABLE_ONEDNN_OPTS=setting), check=True)
    lines = []
    for setting in args.onednn.split(","):
        with open(os.path.join(args.out, "results-onednn%s.jsonl" % setting)) as f:
            lines += [json.loads(line) for line in f]
    names = {run.name for run in spec.family(args.size, args.steps)}
    lines = [d for d in lines if d["run"] in names and (not args.only or d["run"] in args.only.split(","))]
    head = ["run", "slip"] + [h % s for s in args.onednn.split(",") for h in (
        "correct, oneDNN %s", "slip found, oneDNN %s", "explained steps, oneDNN %s",
        "judged / plain (s), oneDNN %s")]
    rows = table(args, lines)
    if args.markdown:
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        print("\n".join("| " + " | ".join(r) + " |" for r in rows))
    else:
        from tracekit.report.text import table as text_table

        print("\n".join(text_table(head, rows)))
    v = verdicts(lines)
    print("family%s%s: %d runs x %d oneDNN settings: %d false failures of %d correct ports, %d of %d slips found at their "
          "step" % (" (round-off emulated: %g ulps)" % args.roundoff if args.roundoff else "",
                    " (whole every %d steps, digests between)" % args.every if args.every > 1 else "", len(rows),
                    len(args.onednn.split(",")), len(v["false"]), v["correct"], len(v["found"]),
                    v["slips"]))
    sys.exit(1 if v["false"] or len(v["found"]) < v["slips"] else 0)


if __name__ == "__main__":
    main()
