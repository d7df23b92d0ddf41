"""The commands on trace files: show, verify, export, log and recover."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..errors import CorruptTrace, TracekitError, UsageError
from ..report.terminal import Progress
from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, Command, isolated, terminal_width

if TYPE_CHECKING:
    from ..store import AuditResult


def add(command: Command) -> None:
    p = command("show", _show, "Print a golden's metadata, environment, steps and a table of its tensors.")
    p.add_argument("golden", metavar="GOLDEN", help="a golden trace (.h5), or its URL (https://, s3://, gs://: "
                                                   "read by ranges, docs/GOLDENS.md)")

    p = command("verify", _verify, "Decode every tensor, recompute its checksum and check the file's structure.")
    p.add_argument("golden", metavar="GOLDEN", nargs="+", help="golden traces to check (paths or URLs)")
    p.add_argument("--audit", action="store_true",
                   help="then recompute each step's optimizer updates in float64 from the state before it, its "
                        "gradients and learning rate, and check the recorded state after it agrees within float32 "
                        "round-off (docs/REPORTS.md); exit 1 if a variable disagrees")

    p = command("export", _export, "Write a golden for other tools. --npz: every tensor to a plain numpy .npz "
                                   "archive: keys <step>/<kind>/<name>, strings as fixed-width arrays (numpy drops "
                                   "trailing NUL bytes of bytes items), bfloat16 as raw bits named in __dtypes__. "
                                   "--tensorboard: the golden (and ACTUAL, a replay of it) as TensorBoard runs "
                                   "'golden' and 'actual': losses, learning rates, each variable's norm and, for "
                                   "the actual run, each kind's largest error against step (needs TensorFlow 2).")
    p.add_argument("golden", metavar="GOLDEN", help="a golden trace (.h5)")
    p.add_argument("actual", metavar="ACTUAL", nargs="?", help="with --tensorboard: a replayed trace of the golden")
    p.add_argument("--npz", metavar="OUT", help="the .npz file to write")
    p.add_argument("--tensorboard", metavar="DIR", help="the TensorBoard log directory to write the runs under")

    p = command("log", _log, "Print a golden's provenance: its legacy recording (date, command, machine) and every "
                             "update since (date, reason, machine, and how far the data moved).")
    p.add_argument("golden", metavar="GOLDEN", help="a golden trace (.h5)")

    p = command("recover", _recover, "Turn an unfinished trace (its recorder was killed) into a golden of "
                                     "the steps it completed, in place.")
    p.add_argument("golden", metavar="GOLDEN", nargs="+", help="unfinished traces")


def _shown(path: str) -> "tuple[str, bool]":
    from ..report.trace import show
    from ..store import open_trace

    with open_trace(path) as trace:
        return show(trace), trace.complete


def _show(args: argparse.Namespace) -> int:
    text, complete = isolated(args.golden, _shown, args.golden)
    print(text)
    return EXIT_OK if complete else EXIT_FAIL


def _audited(path: str) -> "AuditResult":
    from ..store import audit_trace, open_trace

    with open_trace(path) as trace:
        return audit_trace(trace)


def _verify(args: argparse.Namespace) -> int:
    from ..report.audit import audit_lines
    from ..report.trace import verified
    from ..store import verify

    code = EXIT_OK
    for path in args.golden:
        try:
            result = verify(path, Progress("verifying %s" % path))  # reads in a child: a crash is damage found
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
        elif args.audit:  # a damaged golden's values are not worth auditing
            try:
                audit = isolated(path, _audited, path)
            except CorruptTrace as exc:
                print("DAMAGED  %s" % exc)
                code = max(code, EXIT_FAIL)
                continue
            print("\n".join(audit_lines(audit, terminal_width())))
            if not audit.ok:
                code = max(code, EXIT_FAIL)
    return code


def _export(args: argparse.Namespace) -> int:
    from ..store.remote import refuse_url

    refuse_url(args.npz, "write an export")
    refuse_url(args.tensorboard, "write an export")
    if not args.npz and not args.tensorboard:
        raise UsageError("say what to write: --npz OUT.npz, --tensorboard DIR, or both")
    if args.actual and not args.tensorboard:
        raise UsageError("ACTUAL is for --tensorboard (the .npz holds the golden alone)")
    code = _export_npz(args) if args.npz else EXIT_OK
    if args.tensorboard:
        code = max(code, _export_tensorboard(args))
    return code


def _export_tensorboard(args: argparse.Namespace) -> int:
    from ..report.reported import compare
    from ..report.tensorboard import export_tensorboard
    from ..store import open_trace

    with open_trace(args.golden) as golden:
        if args.actual is None:
            done = export_tensorboard(golden, args.tensorboard)
        else:
            with open_trace(args.actual) as actual:
                done = export_tensorboard(golden, args.tensorboard, actual, compare(golden, actual))
    print("wrote %s: %s (tensorboard --logdir %s)" % (args.tensorboard, ", ".join(
        "run %s with %d series" % kv for kv in done.runs.items()), args.tensorboard))
    return EXIT_OK


def _export_npz(args: argparse.Namespace) -> int:
    from ..store.export import export_npz

    done = export_npz(args.golden, args.npz, progress=Progress("exporting %s" % args.golden))
    print("wrote %s: %d arrays (keys like step_000000/loss/loss; __meta__ holds the metadata)"
          % (args.npz, done.arrays))
    if not done.complete:  # as show and verify say of it: exit 1
        print("tracekit export: %s is unfinished (%s): exported the %d steps committed so far"
              % (args.golden, done.problem, done.steps), file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def _log(args: argparse.Namespace) -> int:
    from ..report.provenance import log_lines
    from ..store import open_trace, provenance

    with open_trace(args.golden) as trace:
        print("\n".join(log_lines(trace.path, provenance.read(trace.meta, trace.created))))
    return EXIT_OK


def _recover(args: argparse.Namespace) -> int:
    from ..report.trace import recovered
    from ..store import recover

    for path in args.golden:
        print(recovered(recover(path)))
    return EXIT_OK
