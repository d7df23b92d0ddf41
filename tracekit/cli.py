"""The `tracekit` command: a thin layer over the library.

Exit codes: 0 ok; 1 mismatch, damaged or unfinished trace; 2 usage error or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from typing import TYPE_CHECKING, Any, Callable, List, Optional

from ._version import __version__
from .comparison.arbiter import LONG_GOLDEN
from .comparison.calibration import MARGIN
from .comparison.envdiff import PROFILES as TOLERANCE_PROFILES
from .errors import CorruptTrace, TracekitError, UsageError
from .report.terminal import GREEN, RED, Progress, colour, is_terminal

if TYPE_CHECKING:
    from .lifecycle.pending import Pending
    from .lifecycle.update import Written
    from .lifecycle.workspace import Workspace

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

EPILOG = """exit codes: 0 ok; 1 mismatch, damaged or unfinished trace; 2 usage error or unreadable input.
docs: README.md (workflow), docs/FORMAT.md (the golden file format)."""


def _shown(path: str) -> "tuple[str, bool]":
    from .report.trace import show
    from .store import open_trace

    with open_trace(path) as trace:
        return show(trace), trace.complete


def _isolated(path: str, call: Callable[..., Any], *args: Any) -> Any:
    """call(*args) in a child process: a damaged file can crash the HDF5 library itself, and a
    command that checks files must report that, not die of it."""
    from ._isolate import ChildCrashed, in_child

    try:
        return in_child(call, *args)
    except ChildCrashed as exc:
        raise CorruptTrace("%s: the HDF5 library crashed reading it (%s); the file is damaged: restore it or "
                           "record it again" % (path, exc.signal_name)) from None


def _show(args: argparse.Namespace) -> int:
    text, complete = _isolated(args.golden, _shown, args.golden)
    print(text)
    return EXIT_OK if complete else EXIT_FAIL


def _verify(args: argparse.Namespace) -> int:
    from .report.trace import verified
    from .store import verify

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
    return code


def _export(args: argparse.Namespace) -> int:
    from .store.remote import refuse_url

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
    from .report.reported import compare
    from .report.tensorboard import export_tensorboard
    from .store import open_trace

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
    from .store.export import export_npz

    done = export_npz(args.golden, args.npz, progress=Progress("exporting %s" % args.golden))
    print("wrote %s: %d arrays (keys like step_000000/loss/loss; __meta__ holds the metadata)"
          % (args.npz, done.arrays))
    if not done.complete:  # as show and verify say of it: exit 1
        print("tracekit export: %s is unfinished (%s): exported the %d steps committed so far"
              % (args.golden, done.problem, done.steps), file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def _recover(args: argparse.Namespace) -> int:
    from .report.trace import recovered
    from .store import recover

    for path in args.golden:
        print(recovered(recover(path)))
    return EXIT_OK


PROFILES = ("auto",) + tuple(sorted(TOLERANCE_PROFILES))


def _tolerance(args: argparse.Namespace) -> Any:
    """The tolerance --tolerance, --profile or --exact ask for (None: auto)."""
    from .comparison import Tolerance

    profile = "exact" if args.exact else args.profile
    if args.tolerance and profile != "auto":
        raise UsageError("--tolerance and --exact/--profile exclude each other")
    return Tolerance.load(args.tolerance) if args.tolerance else (None if profile == "auto" else profile)


def _diff(args: argparse.Namespace) -> int:
    from .comparison.select import Selection, parse_steps
    from .report.reported import compare

    tolerance = _tolerance(args)
    selection = Selection(tuple(args.kind or ()), args.name, None if args.step is None else parse_steps(args.step))
    with Progress("comparing %s" % args.actual) as progress:
        result = compare(args.golden, args.actual, tolerance, progress=progress)
    replay = result.golden_steps > LONG_GOLDEN and not result.ok and result.forcing == "none"
    if replay and isinstance(_meta(args.actual).get("replay"), dict):
        result.notes.append("a golden of %d steps: a correct port's own trajectory leaves it at the first "
                            "discontinuity round-off crosses; judge it with tracekit check GOLDEN MODULE:FUNCTION "
                            "(each step's own error, the float64 arbiter, a drift envelope)" % result.golden_steps)
    if args.json:
        print(json.dumps(result.to_dict(by_step=not args.no_steps, selection=selection), indent=1, allow_nan=False))
    else:
        text = result.report(selection, _terminal_width())
        word = text.split(" ", 1)[0]
        print(colour(word, GREEN if result.ok else RED) + text[len(word):])
    return EXIT_OK if result.ok else EXIT_FAIL


def _meta(path: str) -> Any:
    from .store import open_trace

    with open_trace(path) as trace:
        return trace.meta


def _check(args: argparse.Namespace) -> int:
    make_port = _port(args.port)
    import tracekit.tf2  # TensorFlow: only this command needs it

    options = {} if args.steps is None else {"steps": args.steps}
    result = tracekit.tf2.check(args.golden, make_port=make_port, tolerance=_tolerance(args), judge=args.judge,
                                **options)
    print(json.dumps(result.to_dict(by_step=False), indent=1, allow_nan=False) if args.json else result.report())
    if args.html:
        result.write_html(args.html)
        print("wrote %s" % args.html, file=sys.stderr)
    return EXIT_OK if result.ok else EXIT_FAIL


def _report(args: argparse.Namespace) -> int:
    from .report.plots import pyplot
    from .report.reported import compare

    pyplot()  # without matplotlib, say how to install it before a long comparison, not after
    with Progress("comparing %s" % args.actual) as progress:
        result = compare(args.golden, args.actual, _tolerance(args), progress=progress)
    result.write_html(args.output)
    print("wrote %s: %s" % (args.output, "MATCH" if result.ok else "MISMATCH (the page shows where and why)"))
    return EXIT_OK if result.ok else EXIT_FAIL


def _port(spec: str) -> Any:
    """make_port from MODULE:FUNCTION, importable from the current directory."""
    import importlib

    module_name, _, function_name = spec.partition(":")
    if not module_name or not function_name:
        raise UsageError("give the port as MODULE:FUNCTION (FUNCTION() returns a fresh (model, step)), got %r" % spec)
    sys.path.insert(0, os.getcwd())  # the user's modules, as python -m would find them
    try:
        return getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise UsageError("cannot load the port %s: %s" % (spec, exc)) from None


def _localize(args: argparse.Namespace) -> int:
    make_port = _port(args.port)
    import tracekit.tf2  # TensorFlow: only this command needs it

    if args.html:
        from .report.plots import pyplot

        pyplot()  # without matplotlib, say so before the replays
    found = tracekit.tf2.localize(args.golden, make_port, tolerance=_tolerance(args), out=args.out, steps=args.steps)
    print(json.dumps(found.to_dict(), indent=1, allow_nan=False) if args.json else found.report())
    if args.html:
        found.write_html(args.html)
        print("wrote %s" % args.html, file=sys.stderr)
    return EXIT_OK if found.ok else EXIT_FAIL


def _calibrate(args: argparse.Namespace) -> int:
    from .report.calibration import default_path

    make_port = _port(args.port)
    import tracekit.tf2  # TensorFlow: only this command needs it

    with Progress("calibrating %s" % args.golden, unit="replays") as progress:
        found = tracekit.tf2.calibrate(args.golden, make_port, runs=args.runs, margin=args.margin,
                                       progress=progress, steps=args.steps)
    path = found.save(args.output or default_path(args.golden))
    print(json.dumps(found.to_dict(), indent=1, allow_nan=False) if args.json else found.report())
    print("wrote %s (tracekit diff --tolerance %s)" % (path, path), file=sys.stderr)
    return EXIT_OK if found.ok else EXIT_FAIL


def _terminal_width() -> Optional[int]:
    """The terminal's width when stdout is one (tables are elided to fit), else None: logs keep whole names."""
    if not is_terminal(sys.stdout):
        return None
    return shutil.get_terminal_size((100, 24)).columns


def _env(args: argparse.Namespace) -> int:
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
    from .store.remote import refuse_url
    from .store.writer import check_path

    refuse_url(args.output, "record a golden")
    check_path(args.output)  # before TensorFlow is imported and the script trains
    if args.budget is not None:
        from .record.keyframes import parse_size

        parse_size(args.budget)
        if args.steps is None:
            raise UsageError("--budget plans the keyframes of a recording of known length: give --steps N too")
    from .record.declared import Declared
    from .record.launch import run_script  # imports TensorFlow: only this command needs it

    script = list(args.script)
    if script and script[0] == "--":
        script = script[1:]
    declared = Declared.of(args.loss, args.learning_rate, args.train_op, args.gradient)
    with Progress("recording %s" % args.output) as progress:
        code = run_script(script, args.output, seed=args.seed, seed_mode=args.seed_mode, every=args.every,
                          steps=args.steps, progress=progress, declared=declared, worker=args.worker,
                          budget=args.budget, digests=not args.no_digests)
    print("recorded %s" % args.output, file=sys.stderr)
    return code


def _workspace(args: argparse.Namespace) -> "Workspace":
    from .lifecycle.workspace import Workspace

    return Workspace(os.path.abspath(args.workspace)) if args.workspace else Workspace.find()


def _pending(args: argparse.Namespace) -> int:
    from .lifecycle import pending
    from .report.lifecycle import pending_lines

    workspace = _workspace(args)
    print("\n".join(pending_lines(pending.entries(workspace))))
    return EXIT_OK


def _accepted(written: "Written", name: str) -> str:
    kept = "; the replaced golden is kept at %s" % written.kept if written.kept else ""
    return "accepted %s: %s %s%s" % (name, "created" if written.created else "rewrote", written.path, kept)


def _chosen(args: argparse.Namespace, verb: str) -> "List[Pending]":
    from .lifecycle import pending

    if args.all == bool(args.name):
        raise UsageError("name the pending actuals to %s (tracekit pending lists them), or give --all" % verb)
    workspace = _workspace(args)
    chosen = pending.entries(workspace) if args.all else [pending.find(workspace, name) for name in args.name]
    if not chosen:
        print("no pending actuals in %s" % workspace.pending)
    return chosen


def _each(chosen: "List[Pending]", act: Callable[["Pending"], str]) -> int:
    """act on every entry, going on after one that cannot be done (said on stderr): exit 1 if any."""
    code = EXIT_OK
    for entry in chosen:
        try:
            print(act(entry))
        except TracekitError as exc:
            print("tracekit: %s: %s" % (entry.name, exc), file=sys.stderr)
            code = EXIT_FAIL
    return code


def _accepting(args: argparse.Namespace, workspace: "Workspace") -> Callable[["Pending"], str]:
    """Accept an entry with the command's --reason and --no-keep; the line saying so."""
    from .lifecycle import pending

    def accept(entry: "Pending") -> str:
        return _accepted(pending.accept(workspace, entry, reason=args.reason, keep_replaced=not args.no_keep),
                         entry.name)
    return accept


def _accept(args: argparse.Namespace) -> int:
    from .lifecycle import pending

    workspace, chosen = _workspace(args), _chosen(args, "accept")
    pending.one_per_golden(chosen)
    return _each(chosen, _accepting(args, workspace))


def _reject(args: argparse.Namespace) -> int:
    from .lifecycle import pending

    workspace = _workspace(args)

    def reject(entry: "Pending") -> str:
        pending.reject(workspace, entry)
        return "rejected %s: %s stays as it is" % (entry.name, entry.golden)
    return _each(_chosen(args, "reject"), reject)


def _review(args: argparse.Namespace) -> int:
    from .lifecycle import pending
    from .report.lifecycle import entry_lines

    workspace = _workspace(args)
    entries = pending.entries(workspace)
    if not entries:
        print("no pending actuals in %s" % workspace.pending)
        return EXIT_OK
    code = EXIT_OK
    for number, entry in enumerate(entries, 1):
        print("\n".join(["", "[%d/%d]" % (number, len(entries))] + entry_lines(entry)))
        while True:
            print("accept, reject, skip or quit? [a/r/s/q] ", end="", flush=True)
            answer = sys.stdin.readline()
            choice = answer.strip().lower()[:1]
            if not answer or choice == "q":  # end of input: stop, leaving the rest pending
                print("" if answer else "(end of input)")
                return code
            if choice in ("a", "r", "s"):
                break
        if choice == "a":
            code = max(code, _each([entry], _accepting(args, workspace)))
        elif choice == "r":
            pending.reject(workspace, entry)
            print("rejected %s" % entry.name)
        else:
            print("skipped %s: still pending" % entry.name)
    return code


def _log(args: argparse.Namespace) -> int:
    from .report.provenance import log_lines
    from .store import open_trace, provenance

    with open_trace(args.golden) as trace:
        print("\n".join(log_lines(trace.path, provenance.read(trace.meta, trace.created))))
    return EXIT_OK


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
                   help="keep gradients, taps and variables whole every K-th step and at the last (with --steps), "
                        "as digests (statistics and a fixed sample) in between; inputs, random draws, loss and "
                        "learning rate whole at every step. Default 1")
    p.add_argument("--no-digests", action="store_true",
                   help="with --every K: keep nothing of gradients, taps and variables between keyframes")
    p.add_argument("--budget", metavar="SIZE",
                   help="keep the golden under SIZE (500MB, 2GiB): keyframe spacing and what keyframes keep "
                        "are chosen for it at the first step and stored in the golden (needs --steps)")
    p.add_argument("--steps", type=int, metavar="N", help="stop the script after N recorded steps")
    p.add_argument("--loss", action="append", metavar="NAME",
                   help="the loss tensor, where the recorder picks another (graph name, e.g. total_loss:0)")
    p.add_argument("--learning-rate", action="append", metavar="NAME",
                   help="a learning-rate tensor the recorder does not find (repeatable)")
    p.add_argument("--train-op", action="append", metavar="NAME",
                   help="an op whose runs are training steps although the recorder does not see them train "
                        "(repeatable)")
    p.add_argument("--gradient", action="append", metavar="VAR=TENSOR",
                   help="a variable's gradient, where a step computes it by hand (repeatable)")
    p.add_argument("--worker", type=int, metavar="N",
                   help="parameter-server training: record the steps of worker task N (runs placed on "
                        "/job:worker/task:N); default: the first graph that trains")
    p.add_argument("script", nargs=argparse.REMAINDER, metavar="-- script.py ARGS",
                   help="the script and its arguments (or -m module ARGS)")

    def porting(p: argparse.ArgumentParser) -> None:
        p.add_argument("golden", metavar="GOLDEN", help="the golden trace")
        p.add_argument("port", metavar="MODULE:FUNCTION",
                       help="the port: FUNCTION() in MODULE (importable from here) returns a fresh (model, step "
                            "function), or (model, step function, {replay option: value})")

    def comparing(p: argparse.ArgumentParser) -> None:
        p.add_argument("golden", metavar="GOLDEN", help="the golden trace (a path or a URL)")
        p.add_argument("actual", metavar="ACTUAL", help="the replayed trace (tracekit.tf2.replay(...).save(path))")
        p.add_argument("--tolerance", metavar="FILE",
                       help="a TOML tolerance policy: atol, rtol, equal_nan and [[rule]] tables with kind, name "
                            "(glob, or re:regex), steps = [start, stop] or [start], atol, rtol, equal_nan, ignore")
        p.add_argument("--profile", choices=PROFILES, default="auto",
                       help="the tolerance without --tolerance. auto (the default) picks from the two traces: "
                            "default (float32 atol=1e-5, rtol=1e-6) for a replayed port or another TensorFlow; for "
                            "two runs of the same code, exact when nothing that selects kernels differs, else "
                            "round-off, the cross-machine bound (docs/NUMERICS.md). training: step 0 at the default, "
                            "later steps also allowing a port's measured round-off growth (Tolerance.training()). "
                            "auto also picks mixed-precision for a port under mixed_float16 and gpu for a port on a GPU "
                            "(docs/DISTRIBUTE.md)")
        p.add_argument("--exact", action="store_true", help="demand equal values: --profile exact")

    p = command("diff", _diff, "Compare a replayed trace with its golden: per-tensor statistics and the first "
                               "step, stage and tensor that diverge.")
    comparing(p)
    p.add_argument("--json", action="store_true",
                   help="print the comparison as JSON (result.to_dict(): verdict, first divergence, environment "
                        "difference, per-tensor statistics at every step) instead of the text report")
    p.add_argument("--no-steps", action="store_true", help="with --json: leave out the per-step statistics")
    p.add_argument("--kind", action="append", metavar="KIND",
                   help="show only tensors of this kind (input, random, tap, fetch, loss, lr, grad, var, slot); "
                        "repeat for several. Filters narrow the table and the JSON, not the verdict")
    p.add_argument("--name", metavar="GLOB", help="show only tensors whose name matches (a glob, or re:REGEX)")
    p.add_argument("--step", metavar="STEPS", help="show only these steps: N, START:STOP (stop excluded), START:, "
                                                   ":STOP; 'initial' is the initial state")

    p = command("report", _report, "Compare a replayed trace with its golden and write the comparison as one "
                                   "self-contained HTML page: verdict, first divergence, environment difference, "
                                   "loss and learning-rate curves of both runs, errors per kind against step, a "
                                   "tensor x step heatmap, error against magnitude, the per-tensor table. Needs "
                                   "matplotlib (pip install 'tracekit[report]').")
    comparing(p)
    p.add_argument("-o", "--output", required=True, metavar="OUT.html", help="the page to write")

    p = command("calibrate", _calibrate, "Measure how much a model's training amplifies round-off and write a "
                                         "tolerance that covers it: replay the port once as it is and --runs times "
                                         "from a start moved one ulp, per tensor and band of steps take the largest "
                                         "deviation times --margin where it exceeds the training profile's floor, "
                                         "never past the cap (1/64 of a tensor's scale: such tensors are listed and "
                                         "left to the noise analysis). Writes the TOML tolerance; exit 0 when the "
                                         "port passes under it, 1 when not. Needs TensorFlow 2.")
    porting(p)
    p.add_argument("--runs", type=int, default=4, metavar="N", help="replays from a perturbed start (default 4)")
    p.add_argument("--margin", type=float, default=MARGIN, metavar="M",
                   help="the factor over the largest deviation seen (default %g)" % MARGIN)
    p.add_argument("--steps", type=int, metavar="N", help="replay only the first N steps")
    p.add_argument("-o", "--output", metavar="FILE.toml",
                   help="where to write the tolerance (default: GOLDEN's name with .tolerance.toml)")
    p.add_argument("--json", action="store_true", help="print what was measured and derived as JSON")

    p = command("check", _check, "Replay a TF2 port against its golden and judge it. A golden longer than %d steps "
                                 "is judged by each step's own error (teacher-forced), the steps that fail judged by "
                                 "the float64 arbiter (round-off through a ReLU, max-pooling or threshold is not a port "
                                 "error), and the port's drift against an envelope of perturbed replays; a shorter "
                                 "one as the replay runs. Exit 0 on a match, 1 on a mismatch. Needs TensorFlow 2."
                % LONG_GOLDEN)
    porting(p)
    p.add_argument("--judge", choices=("auto", "plain", "local"), default="auto",
                   help="auto (local for long goldens), plain (the replay as it runs) or local")
    p.add_argument("--steps", type=int, metavar="N", help="replay only the first N steps")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON (without per-step statistics)")
    p.add_argument("--html", metavar="FILE", help="also write the HTML report (needs matplotlib)")
    p.add_argument("--tolerance", metavar="FILE", help="a TOML tolerance policy (as for diff)")
    p.add_argument("--profile", choices=PROFILES, default="auto", help="the tolerance without --tolerance (as for diff)")
    p.add_argument("--exact", action="store_true", help="demand equal values: --profile exact")

    p = command("localize", _localize, "Find where a TF2 port first computes differently from its golden: replay it, "
                                       "then with each step started from the golden's state (forcing='state') and "
                                       "with each tap handed the golden's value (forcing='taps'); print the first "
                                       "step whose own error exceeds the tolerance, the first tensor in it, and write "
                                       "a one-step reproduction (a golden of that step and a script replaying it). "
                                       "Exit 0 when no step does, 1 when one does. Needs TensorFlow 2.")
    porting(p)
    p.add_argument("--out", metavar="DIR", help="where to write the reproduction (default: a new temporary directory)")
    p.add_argument("--steps", type=int, metavar="N", help="replay only the first N steps")
    p.add_argument("--json", action="store_true", help="print the finding as JSON (the three comparisons included)")
    p.add_argument("--html", metavar="FILE", help="also write the HTML report, each step's own error beside the "
                                                  "accumulated one (needs matplotlib)")
    p.add_argument("--tolerance", metavar="FILE", help="a TOML tolerance policy (as for diff)")
    p.add_argument("--profile", choices=PROFILES, default="auto", help="the tolerance without --tolerance (as for diff)")
    p.add_argument("--exact", action="store_true", help="demand equal values: --profile exact")

    p = command("env", _env, "Print this machine's environment fingerprint, as a trace recorded here would "
                             "store it: CPU instruction sets, oneDNN, threads, XLA, determinism, TF32, devices.")
    p.add_argument("--json", action="store_true", help="as JSON")
    p.add_argument("--no-tensorflow", action="store_true",
                   help="do not import TensorFlow (faster; leaves out what only TensorFlow can tell)")

    p = command("show", _show, "Print a golden's metadata, environment, steps and a table of its tensors.")
    p.add_argument("golden", metavar="GOLDEN", help="a golden trace (.h5), or its URL (https://, s3://, gs://: "
                                                   "read by ranges, docs/GOLDENS.md)")

    p = command("verify", _verify, "Decode every tensor, recompute its checksum and check the file's structure.")
    p.add_argument("golden", metavar="GOLDEN", nargs="+", help="golden traces to check (paths or URLs)")

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

    def lifecycle(name: str, func: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p = command(name, func, help)
        p.add_argument("--workspace", metavar="DIR",
                       help="the project root holding .tracekit/ (default: the nearest one from here upwards)")
        return p

    def choosing(p: argparse.ArgumentParser, verb: str) -> None:
        p.add_argument("name", nargs="*", metavar="NAME|PATH", help="pending actuals to %s: a name `tracekit "
                                                                    "pending` lists, or the path of its file" % verb)
        p.add_argument("--all", action="store_true", help="%s every pending actual" % verb)

    def replacing(p: argparse.ArgumentParser) -> None:
        p.add_argument("--reason", metavar="TEXT", help="why: stored in the golden's history (tracekit log)")
        p.add_argument("--no-keep", action="store_true",
                       help="do not keep the replaced golden under .tracekit/history (it is kept by default)")

    lifecycle("pending", _pending, "List the actual traces kept by replay tests that differed from their golden "
                                   "(or would create a missing one), with their verdicts.")
    p = lifecycle("accept", _accept, "Make pending actuals their goldens (atomically; the replaced golden is kept "
                                     "under .tracekit/history and the golden's history records the update).")
    choosing(p, "accept")
    replacing(p)
    p = lifecycle("reject", _reject, "Drop pending actuals; their goldens stay as they are.")
    choosing(p, "reject")
    p = lifecycle("review", _review, "Walk the pending actuals one by one: show each report, then accept, reject "
                                     "or skip it (answers are read from standard input).")
    replacing(p)
    p = command("log", _log, "Print a golden's provenance: its legacy recording (date, command, machine) and every "
                             "update since (date, reason, machine, and how far the data moved).")
    p.add_argument("golden", metavar="GOLDEN", help="a golden trace (.h5)")

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
    except OSError as exc:  # permissions, a full disk, a file system without locks: one line, not a traceback
        if args.command == "record":
            raise  # the recorded script's own error: its traceback is what its author needs
        print("tracekit %s: error: %s" % (args.command, exc), file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
