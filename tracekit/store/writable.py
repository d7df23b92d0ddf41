"""Where a golden can be written, asked before a recording starts, and what a write that
failed says (the writer: writer.py)."""

from __future__ import annotations

import os

from ..errors import TraceWriteError


def check_path(path: str) -> None:
    """Raise TraceWriteError if a golden cannot be written at `path` (a directory, or in a
    directory that does not exist): asked before a recording starts, not when it ends. A URL
    is a UsageError: goldens are written locally."""
    from .remote import refuse_url

    refuse_url(path, "write a trace")
    if os.path.isdir(path):
        raise TraceWriteError("%s is a directory: name the golden file to write, e.g. %s"
                              % (path, os.path.join(path, "golden.h5")))
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.exists(parent) and not os.path.isdir(parent):
        raise TraceWriteError("cannot write a trace to %s: %s is not a directory; choose a writable path"
                              % (path, parent))
    if not os.path.isdir(parent):
        raise TraceWriteError("cannot write a trace to %s: the directory %s does not exist; create it first"
                              % (path, parent))


def write_error(path: str, exc: BaseException) -> Exception:
    """What a write that failed raises: an OS error as a TraceWriteError that names the golden and
    how to keep its committed steps; anything else as it is."""
    if isinstance(exc, OSError):
        return TraceWriteError("writing %s failed: %s; the steps committed before it are kept "
                               "(tracekit recover %s)" % (path, exc.strerror or exc, path))
    return exc if isinstance(exc, Exception) else RuntimeError(repr(exc))
