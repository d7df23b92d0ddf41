"""Measure machine round-off against the bound (docs/NUMERICS.md), on this machine:

1. re-record the three example goldens on TF 1.15.5 (the legacy environment) and compare
   each with the shipped golden and with the one recorded on another machine
   (tests/data/foreign_cpu);
2. replay the Estimator port on TF 2.21 with oneDNN capped at other instruction sets
   (ONEDNN_MAX_CPU_ISA) and compare each with the uncapped replay.

Prints, per comparison, the largest error of each kind in ulps of the tensor's scale
(eps * max |golden|), and the bound (Tolerance.roundoff()).

    .venv/bin/python tools/roundoff.py [--out build/roundoff] [--steps 10]
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import tracekit  # noqa: E402
from tracekit.comparison.tolerance import ROUNDOFF_ULPS  # noqa: E402
from tracekit.report.environment import summary  # noqa: E402
from tracekit.report.text import table  # noqa: E402

KINDS = ["tap", "loss", "grad", "var", "slot"]
LEGACY = os.path.join(ROOT, ".venv-legacy", "bin", "python")
RECORDINGS = [  # golden, command after the interpreter
    ("seed_example", ["tools/goldens/seed_example.py", "{out}", "--steps", "100"]),
    ("estimator_model", ["tools/goldens/estimator_model.py", "{out}", "--steps", "50"]),
    ("slim_resnet", ["-m", "tracekit", "record", "-o", "{out}", "--", "tools/goldens/slim_resnet.py", "--steps", "5"]),
]
CAPS = ["SSE41", "AVX"]
ONEDNN_VARIABLES = ("TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")


def run(python, args, **env):
    full = {k: v for k, v in os.environ.items() if k not in ONEDNN_VARIABLES}
    full.update(PYTHONPATH=ROOT, PYTHONHASHSEED="0", TF_CPP_MIN_LOG_LEVEL="2", **env)
    subprocess.run([python] + args, cwd=ROOT, env=full, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def row(label, result):
    ulps = {errors.kind: "%.3g" % errors.max_ulps for errors in result.max_errors()}
    return [label] + [ulps.get(kind, "-") for kind in KINDS] + ["ok" if result.ok else "EXCEEDED"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "build", "roundoff"))
    parser.add_argument("--steps", type=int, default=10, help="steps of each TF 2 replay (default 10)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    machines = set()
    if os.path.exists(LEGACY):
        for name, command in RECORDINGS:
            out = os.path.join(args.out, name + ".h5")
            print("recording %s on TF 1.15.5 ..." % name, file=sys.stderr)
            run(LEGACY, [c.format(out=out) for c in command])
            for where, golden_dir in [("shipped", os.path.join(ROOT, "goldens")),
                                      ("other machine", os.path.join(ROOT, "tests", "data", "foreign_cpu"))]:
                result = tracekit.compare(os.path.join(golden_dir, name + ".h5"), out, tracekit.Tolerance.roundoff())
                machines.add(("golden (%s)" % where, summary(result.environment_diff.golden)))
                machines.add(("rerun", summary(result.environment_diff.actual)))
                rows.append(row("TF 1.15 %s: %s golden vs rerun" % (name, where), result))
    else:
        print("no legacy environment: the TF 1.15 reruns are left out", file=sys.stderr)
    child = os.path.join(ROOT, "tests", "replay", "replay_child.py")
    golden = os.path.join(ROOT, "goldens", "estimator_model.h5")
    plain = os.path.join(args.out, "estimator-plain.h5")
    print("replaying the Estimator port on TF 2 ...", file=sys.stderr)
    run(sys.executable, [child, "estimator_model", golden, plain, str(args.steps)])
    for cap in CAPS:
        capped = os.path.join(args.out, "estimator-%s.h5" % cap)
        run(sys.executable, [child, "estimator_model", golden, capped, str(args.steps)],
            TF_ENABLE_ONEDNN_OPTS="1", ONEDNN_MAX_CPU_ISA=cap)
        result = tracekit.compare(plain, capped, tracekit.Tolerance.roundoff())
        machines.add(("replay (%s)" % cap, summary(result.environment_diff.actual)))
        rows.append(row("TF 2 Estimator port: plain vs oneDNN capped at %s" % cap, result))
    machines.add(("replay (plain)", summary(result.environment_diff.golden)))
    rows.append(["bound (ulps)"] + ["%g" % ROUNDOFF_ULPS[k] for k in KINDS] + [""])
    print("largest error per kind, in ulps of the tensor's scale (eps * max |golden|), all steps:")
    print("\n".join(table(["comparison"] + KINDS + ["verdict"], rows, right=range(1, len(KINDS) + 1))))
    for label, text in sorted(machines):
        print("%-22s %s" % (label, text))
    return 0 if all(r[-1] != "EXCEEDED" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
