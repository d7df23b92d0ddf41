"""The review of pending actuals: tracekit pending, accept, reject and review."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Callable, List

from ..errors import TracekitError, UsageError
from .common import EXIT_FAIL, EXIT_OK, Command

if TYPE_CHECKING:
    from ..lifecycle.pending import Pending
    from ..lifecycle.update import Written
    from ..lifecycle.workspace import Workspace


def add(command: Command) -> None:
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


def _workspace(args: argparse.Namespace) -> "Workspace":
    from ..lifecycle.workspace import Workspace

    return Workspace(os.path.abspath(args.workspace)) if args.workspace else Workspace.find()


def _pending(args: argparse.Namespace) -> int:
    from ..lifecycle import pending
    from ..report.lifecycle import pending_lines

    workspace = _workspace(args)
    print("\n".join(pending_lines(pending.entries(workspace))))
    return EXIT_OK


def _accepted(written: "Written", name: str) -> str:
    kept = "; the replaced golden is kept at %s" % written.kept if written.kept else ""
    return "accepted %s: %s %s%s" % (name, "created" if written.created else "rewrote", written.path, kept)


def _chosen(args: argparse.Namespace, verb: str) -> "List[Pending]":
    from ..lifecycle import pending

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
    from ..lifecycle import pending

    def accept(entry: "Pending") -> str:
        return _accepted(pending.accept(workspace, entry, reason=args.reason, keep_replaced=not args.no_keep),
                         entry.name)
    return accept


def _accept(args: argparse.Namespace) -> int:
    from ..lifecycle import pending

    workspace, chosen = _workspace(args), _chosen(args, "accept")
    pending.one_per_golden(chosen)
    return _each(chosen, _accepting(args, workspace))


def _reject(args: argparse.Namespace) -> int:
    from ..lifecycle import pending

    workspace = _workspace(args)

    def reject(entry: "Pending") -> str:
        pending.reject(workspace, entry)
        return "rejected %s: %s stays as it is" % (entry.name, entry.golden)
    return _each(_chosen(args, "reject"), reject)


def _review(args: argparse.Namespace) -> int:
    from ..lifecycle import pending
    from ..report.lifecycle import entry_lines

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
