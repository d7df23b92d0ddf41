"""Calibrated tolerances for the shipped goldens: tracekit.tf2.calibrate with each golden's TF2
port (tools/ports), printing per golden what the perturbed replays measured, what was widened
past the training floor or refused past the cap, and whether the port passes under the result.

    .venv/bin/python tools/calibrate_examples.py [--runs 4] [--out build/calibrated] [--goldens DIR] [NAME ...]

Writes each tolerance as TOML under --out. Exit code 1 if a port fails under its own
calibrated tolerance.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import tracekit.tf2  # noqa: E402
from tools.ports import EXAMPLES, example_port  # noqa: E402
from tracekit.comparison.calibration import CALIBRATED_KINDS  # noqa: E402
from tracekit.report.calibration import step_range  # noqa: E402
from tracekit.report.text import table  # noqa: E402


PORTS = {name: example_port(name) for name in EXAMPLES}  # golden -> make_port


def _num(x):
    return "%.3g" % x if x != float("inf") else "inf"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="goldens to calibrate: %s (default: all)" % ", ".join(PORTS))
    parser.add_argument("--runs", type=int, default=4, help="perturbed replays per golden (default 4)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "build", "calibrated"))
    parser.add_argument("--goldens", default=os.path.join(os.path.dirname(HERE), "goldens"))
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(PORTS))
    if unknown:  # not argparse's choices: with nargs="*" they reject an empty list
        parser.error("no port for %s; choose from %s" % (", ".join(unknown), ", ".join(PORTS)))
    os.makedirs(args.out, exist_ok=True)
    failed = 0
    measured, port_errors = [], []
    for name in args.names or list(PORTS):
        golden = os.path.join(args.goldens, name + ".h5")
        start = time.monotonic()
        found = tracekit.tf2.calibrate(golden, PORTS[name], runs=args.runs)
        took = time.monotonic() - start
        found.save(os.path.join(args.out, name + ".toml"))
        print("%s  %s: %d steps, %d runs, %.1f s" % ("MATCH   " if found.ok else "MISMATCH", name,
                                                      found.spread.steps, found.spread.runs, took))
        if not found.ok:
            failed += 1
            print(found.report())
        for bound in found.derived.bounds:
            print("          %s steps %s: deviation %s, allowed %g ulps" % (
                bound.key, step_range(bound.start, bound.stop), _num(bound.measured), bound.ulps))
        for refused in found.derived.unbounded:
            print("          refused past the cap from step %d: %s (deviation %s)"
                  % (refused.step, refused.key, _num(refused.measured)))
        largest = found.spread.largest()
        measured.append([name] + [_num(largest[k]) if k in largest else "-" for k in CALIBRATED_KINDS]
                        + [len(found.derived.bounds), len(found.derived.unbounded)])
        errors = {e.kind: e.max_ulps for e in found.port.max_errors()}
        port_errors.append([name] + [_num(errors[k]) if k in errors else "-" for k in CALIBRATED_KINDS])
    print("\nlargest deviation of %d replays started one ulp off from the unperturbed one, per kind (eps x the "
          "tensor's scale), and the rules widened past the floor / refused past the cap:" % args.runs)
    print("\n".join(table(["golden"] + list(CALIBRATED_KINDS) + ["widened", "refused"], measured,
                          right=range(1, len(CALIBRATED_KINDS) + 3))))
    print("\nthe port against its golden, largest error per kind (eps x scale; tensors round-off drives left out "
          "where the tolerance accepts them):")
    print("\n".join(table(["golden"] + list(CALIBRATED_KINDS), port_errors, right=range(1, len(CALIBRATED_KINDS) + 1))))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
