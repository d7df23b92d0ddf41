"""What the command groups share: exit codes, the epilog, the tolerance options and their
reading, loading a port, and running a file check in a child process."""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
from typing import Any, Callable, Optional

from ..comparison.profiles import AUTO, profile_names, resolve_tolerance
from ..errors import CorruptTrace, UsageError
from ..report.terminal import is_terminal

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_WARNED = 0, 1, 2, 3

EPILOG = """exit codes: 0 ok; 1 mismatch, damaged or unfinished trace; 2 usage error or unreadable input;
3 (record --strict) the golden was written with warnings.
docs: README.md (workflow) and docs/ (the replay API, the golden format, numerics)."""


PROFILES = (AUTO,) + profile_names()

# Registers a subcommand: command(name, handler, help) -> its parser (cli/__init__.py makes it).
Command = Callable[[str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]


def tolerance_options(p: argparse.ArgumentParser, file_help: str = "a TOML tolerance policy (as for diff)",
                      profile_help: str = "the tolerance without --tolerance (as for diff)") -> None:
    """--tolerance FILE, --profile NAME and --exact, which read_tolerance() reads."""
    p.add_argument("--tolerance", metavar="FILE", help=file_help)
    p.add_argument("--profile", choices=PROFILES, default=AUTO, help=profile_help)
    p.add_argument("--exact", action="store_true", help="demand equal values: --profile exact")


def read_tolerance(args: argparse.Namespace) -> Any:
    """The tolerance --tolerance, --profile or --exact ask for (None: auto)."""
    from ..comparison import Tolerance

    profile = "exact" if args.exact else args.profile
    if args.tolerance and profile != AUTO:
        raise UsageError("--tolerance and --exact/--profile exclude each other")
    return Tolerance.load(args.tolerance) if args.tolerance else resolve_tolerance(profile, os.getcwd())


def isolated(path: str, call: Callable[..., Any], *args: Any) -> Any:
    """call(*args) in a child process: a damaged file can crash the HDF5 library itself, and a
    command that checks files must report that, not die of it."""
    from .._isolate import ChildCrashed, in_child

    try:
        return in_child(call, *args)
    except ChildCrashed as exc:
        raise CorruptTrace("%s: the HDF5 library crashed reading it (%s); the file is damaged: restore it or "
                           "record it again" % (path, exc.signal_name)) from None


def port(spec: str) -> Any:
    """make_port from MODULE:FUNCTION, importable from the current directory."""
    module_name, _, function_name = spec.partition(":")
    if not module_name or not function_name:
        raise UsageError("give the port as MODULE:FUNCTION (FUNCTION() returns a fresh (model, step)), got %r" % spec)
    sys.path.insert(0, os.getcwd())  # the user's modules, as python -m would find them
    try:
        return getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise UsageError("cannot load the port %s: %s" % (spec, exc)) from None


def framework_of(make_port: Any) -> str:
    """"torch", "jax" or "tensorflow": the one of them the port's module brought in; where it
    brought in several, or none, the model a port it makes has (replay/factory.py)."""
    loaded = [name for name in ("torch", "jax", "tensorflow") if name in sys.modules]
    if len(loaded) == 1:
        return loaded[0]
    if not loaded:
        return "tensorflow"
    from ..replay.factory import framework_of_model  # the replay engine: Python >= 3.8, as replays are

    made = make_port()
    return framework_of_model(made[0] if isinstance(made, tuple) and made else None)


def meta(path: str) -> Any:
    from ..store import open_trace

    with open_trace(path) as trace:
        return trace.meta


def terminal_width() -> Optional[int]:
    """The terminal's width when stdout is one (tables are elided to fit), else None: logs keep whole names."""
    if not is_terminal(sys.stdout):
        return None
    return shutil.get_terminal_size((100, 24)).columns
