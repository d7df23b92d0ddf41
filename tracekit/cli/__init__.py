"""The `tracekit` command: a thin layer over the library, a module per group of commands.

Exit codes: 0 ok; 1 mismatch, damaged or unfinished trace; 2 usage error or unreadable input.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, List, Optional

from .._version import __version__
from ..errors import CorruptTrace, TracekitError
from . import comparing, porting, recording, review, traces
from .common import EPILOG, EXIT_FAIL, EXIT_USAGE


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

    for group in (recording, comparing, porting, traces, review):
        group.add(command)
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
