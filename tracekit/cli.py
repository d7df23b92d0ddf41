"""The `tracekit` command: a thin layer over the library.

Exit codes: 0 ok; 1 mismatch, damaged or unfinished trace; 2 usage error or unreadable input.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, List, Optional

from ._version import __version__
from .comparison.envdiff import PROFILES as TOLERANCE_PROFILES
from .errors import CorruptTrace, TracekitError, UsageError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

EPILOG = """exit codes: 0 ok; 1 mismatch, damaged or unfinished trace; 2 usage error or unreadable input.
docs: README.md (workflow), docs/FORMAT.md (the golden file format)."""


class Progress:
    """One updating line on stderr for long work, only when stderr is a terminal."""

    def __init__(self, label: str, stream=None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self._last < 0.2 and done < total):
            return
        self._last = now
        self.stream.write("\r%s: %d/%d%s" % (self.label, done, total, "\n" if done >= total else ""))
        self.stream.flush()


def _show(args: argparse.Namespace) -> int:
    from .report.trace import show
    from .store import open_trace

    with open_trace(args.golden) as trace:
        print(show(trace))
        return EXIT_OK if trace.complete else EXIT_FAIL


def _verify(args: argparse.Namespace) -> int:
    from .report.trace import verified
    from .store import verify

    code = EXIT_OK
    for path in args.golden:
        try:
            result = verify(path, progress=Progress("verifying %s" % path))
        except CorruptTrace as exc:  # found, but too damaged to open
            print("DAMAGED  %s" % exc)
            code = max(code, EXIT_FAIL)
            continue
        except TracekitError as exc:  # missing, not a trace, newer format
            print("UNREADABLE %s" % exc)
            code = EXIT_USAGE
            continue
        print(verified(result))
        if not result.ok:
            code = max(code, EXIT_FAIL)
    return code


def _export(args: argparse.Namespace) -> int:
    from .store.export import export_npz

    count = export_npz(args.golden, args.npz, progress=Progress("exporting %s" % args.golden))
    print("wrote %s: %d arrays (keys like step_000000/loss/loss; __meta__ holds the metadata)" % (args.npz, count))
    return EXIT_OK


def _recover(args: argparse.Namespace) -> int:
    from .report.trace import recovered
    from .store import recover

    for path in args.golden:
        print(recovered(recover(path)))
    return EXIT_OK


PROFILES = ("auto",) + tuple(sorted(TOLERANCE_PROFILES))


def _diff(args: argparse.Namespace) -> int:
    from .comparison import Tolerance
    from .report.comparison import compare

    profile = "exact" if args.exact else args.profile
    if args.tolerance and profile != "auto":
        raise UsageError("--tolerance and --exact/--profile exclude each other")
    tolerance = Tolerance.load(args.tolerance) if args.tolerance else (None if profile == "auto" else profile)
    result = compare(args.golden, args.actual, tolerance)
    print(result.report())
    return EXIT_OK if result.ok else EXIT_FAIL


def _env(args: argparse.Namespace) -> int:
    import json

    from .environment import fingerprint, tensorflow_environment
    from .report.environment import fingerprint_text

    meta: dict = {}
    if not args.no_tensorflow:
        try:
            os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # as the replayer: tf-keras on TF >= 2.16
            import tensorflow as tf  # the settings only the running TensorFlow can tell
        except ImportError:
            print("tracekit env: TensorFlow is not installed here; showing the machine only", file=sys.stderr)
        else:
            meta["tensorflow"] = tensorflow_environment(tf)
    meta["environment"] = fingerprint()  # after the import: the versions it loaded, the variables it set
    print(json.dumps(meta, indent=2, sort_keys=True, default=str) if args.json else fingerprint_text(meta))
    return EXIT_OK


def _record(args: argparse.Namespace) -> int:
    from .record.launch import run_script  # imports TensorFlow: only this command needs it

    script = list(args.script)
    if script and script[0] == "--":
        script = script[1:]
    code = run_script(script, args.output, seed=args.seed, seed_mode=args.seed_mode, every=args.every,
                      steps=args.steps)
    print("recorded %s" % args.output, file=sys.stderr)
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tracekit",
        description="Record TF1 training runs into golden traces; check TF2 ports against them.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version="tracekit %s" % __version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def command(name: str, func: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help, epilog=EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(func=func)
        return p

    p = command("record", _record, "Run an unmodified TF1 training script and record every training step it "
                                   "runs into a golden (needs TensorFlow: the legacy environment, or TF 2 "
                                   "tf.compat.v1 code).")
    p.add_argument("-o", "--output", required=True, metavar="OUT.h5", help="the golden to write")
    p.add_argument("--seed", type=int, help="graph seed to set before the script builds its graph")
    p.add_argument("--seed-mode", choices=["constant", "num_random_ops"],
                   help="control every random op's seeds like tf.compat.v1.keras.utils.DeterministicRandomTestTool")
    p.add_argument("--every", type=int, default=1, metavar="K",
                   help="record gradients, taps and variables every K-th step (inputs, random draws, loss and "
                        "learning rate every step); default 1")
    p.add_argument("--steps", type=int, metavar="N", help="stop the script after N recorded steps")
    p.add_argument("script", nargs=argparse.REMAINDER, metavar="-- script.py ARGS",
                   help="the script and its arguments (or -m module ARGS)")

    p = command("diff", _diff, "Compare a replayed trace with its golden: per-tensor statistics and the first "
                               "step, stage and tensor that diverge.")
    p.add_argument("golden", metavar="GOLDEN", help="the golden trace")
    p.add_argument("actual", metavar="ACTUAL", help="the replayed trace (tracekit.tf2.replay(...).save(path))")
    p.add_argument("--tolerance", metavar="FILE",
                   help="a TOML tolerance policy: atol, rtol, equal_nan and [[rule]] tables with kind, name "
                        "(glob, or re:regex), steps = [start, stop] or [start], atol, rtol, equal_nan, ignore")
    p.add_argument("--profile", choices=PROFILES, default="auto",
                   help="the tolerance without --tolerance. auto (the default) picks from the two traces: "
                        "default (float32 atol=1e-5, rtol=1e-6) for a replayed port or another TensorFlow; for "
                        "two runs of the same code, exact when nothing that selects kernels differs, else "
                        "round-off, the cross-machine bound (docs/NUMERICS.md). training: step 0 at the default, "
                        "later steps also allowing a port's measured round-off growth (Tolerance.training())")
    p.add_argument("--exact", action="store_true", help="demand equal values: --profile exact")

    p = command("env", _env, "Print this machine's environment fingerprint, as a trace recorded here would "
                             "store it: CPU instruction sets, oneDNN, threads, XLA, determinism, TF32, devices.")
    p.add_argument("--json", action="store_true", help="as JSON")
    p.add_argument("--no-tensorflow", action="store_true",
                   help="do not import TensorFlow (faster; leaves out what only TensorFlow can tell)")

    p = command("show", _show, "Print a golden's metadata, environment, steps and a table of its tensors.")
    p.add_argument("golden", metavar="GOLDEN", help="a golden trace (.h5)")

    p = command("verify", _verify, "Decode every tensor, recompute its checksum and check the file's structure.")
    p.add_argument("golden", metavar="GOLDEN", nargs="+", help="golden traces to check")

    p = command("export", _export, "Write every tensor of a golden to a plain numpy .npz archive: keys "
                                   "<step>/<kind>/<name>, strings as fixed-width arrays (numpy drops trailing "
                                   "NUL bytes of bytes items), bfloat16 as raw bits named in __dtypes__.")
    p.add_argument("golden", metavar="GOLDEN", help="a golden trace (.h5)")
    p.add_argument("--npz", required=True, metavar="OUT", help="the .npz file to write")

    p = command("recover", _recover, "Turn an unfinished trace (its recorder was killed) into a golden of "
                                     "the steps it completed, in place.")
    p.add_argument("golden", metavar="GOLDEN", nargs="+", help="unfinished traces")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except CorruptTrace as exc:  # found, but damaged: exit 1, as verify says DAMAGED
        print("tracekit %s: damaged: %s" % (args.command, exc), file=sys.stderr)
        return EXIT_FAIL
    except TracekitError as exc:
        print("tracekit %s: error: %s" % (args.command, exc), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("tracekit %s: interrupted" % args.command, file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`tracekit show G | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit's flush
        return 128 + 13  # as a process killed by SIGPIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
