"""Why calibration keeps a floor: for one golden and its port, how far each source of round-off
moves the port's replay, per kind (largest over all steps, in eps x the tensor's scale):

- replays started one ulp off (what tracekit.tf2.calibrate measures);
- the same port under other kernels: oneDNN off, one intra-op thread, oneDNN capped at SSE4.1
  (each a child process: TensorFlow reads those settings once);
- the golden itself, each step forced from its state (the port's own error per step), and
  the golden with the port run from its own state (the error a tolerance must pass).

    .venv/bin/python tools/calibration_floor.py [--golden estimator_model] [--runs 4]
"""

import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

KINDS = ("tap", "loss", "grad", "var", "slot")
VARIANTS = {  # name -> environment of the child replay
    "oneDNN off": {"TF_ENABLE_ONEDNN_OPTS": "0"},
    "one intra-op thread": {"TRACEKIT_INTRA_OP_THREADS": "1"},
    "oneDNN capped at SSE4.1": {"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}


def _child(golden, out):
    """In a child process: replay the port as it is, under this process's settings."""
    import tracekit.tf2
    from tools.calibrate_examples import PORTS

    threads = os.environ.get("TRACEKIT_INTRA_OP_THREADS")
    if threads:
        tracekit.tf2.tf.config.threading.set_intra_op_parallelism_threads(int(threads))
    made = PORTS[golden]()
    options = made[2] if len(made) > 2 else {}
    tracekit.tf2.replay(os.path.join(ROOT, "goldens", golden + ".h5"), made[1], model=made[0], out=out, **options)


def _largest(result):
    errors = {e.kind: e.max_ulps for e in result.max_errors()}
    return ["%.3g" % errors[k] if k in errors else "-" for k in KINDS]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--golden", default="estimator_model", help="a shipped golden with a port (default: "
                                                                      "estimator_model)")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--child", metavar="OUT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.golden, args.child)
        return 0
    import tracekit
    import tracekit.tf2
    from tools.calibrate_examples import PORTS
    from tracekit.report.text import table

    golden = os.path.join(ROOT, "goldens", args.golden + ".h5")
    rows = []
    with tempfile.TemporaryDirectory(prefix="tracekit-floor-") as folder:
        base = os.path.join(folder, "default.h5")
        subprocess.run([sys.executable, __file__, "--golden", args.golden, "--child", base], check=True)
        found = tracekit.tf2.calibrate(golden, PORTS[args.golden], runs=args.runs)
        largest = found.spread.largest()
        rows.append(["%d replays started one ulp off" % args.runs] +
                    ["%.3g" % largest[k] if k in largest else "-" for k in KINDS])
        for name, env in VARIANTS.items():
            out = os.path.join(folder, "variant.h5")
            subprocess.run([sys.executable, __file__, "--golden", args.golden, "--child", out], check=True,
                           env=dict(os.environ, **env))
            rows.append([name] + _largest(tracekit.compare(base, out, tracekit.Tolerance.exact())))
        made = PORTS[args.golden]()
        options = made[2] if len(made) > 2 else {}
        forced = tracekit.tf2.check(golden, made[1], model=made[0], forcing="state", tolerance="exact", **options)
        rows.append(["the golden, each step forced"] + _largest(forced))
        rows.append(["the golden, the port from its own state"] + _largest(tracekit.compare(golden, base, "exact")))
    print("%s: how far each source of round-off moves the port's replay (largest over all steps, eps x scale)"
          % args.golden)
    print("\n".join(table(["compared with the port's replay"] + list(KINDS), rows, right=range(1, len(KINDS) + 1))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
