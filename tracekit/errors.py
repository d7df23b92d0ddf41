"""Every exception tracekit raises on purpose.

    TracekitError
    ├── GoldenNotFound          (also FileNotFoundError)  no file at the path
    ├── TraceFormatError        (also ValueError)         a file that cannot be read as a trace
    │   ├── NotATrace                                      a foreign file (not tracekit, not HDF5)
    │   ├── NewerFormat                                    written by a newer tracekit
    │   └── CorruptTrace                                   truncated, damaged, checksum mismatch
    ├── TraceWriteError         (also OSError)            the trace cannot be written (exists, no space)
    ├── RemoteError             (also OSError)            a golden at a URL cannot be fetched (no ranges, no access)
    ├── RecordError             (also RuntimeError)       a recording went wrong (no training step seen)
    ├── ReplayError             (also RuntimeError)       a replay cannot go on (unmatched variables, ...)
    ├── Mismatch                (also AssertionError)     a replay differs from its golden (carries the report)
    ├── MissingDependency       (also ImportError)        TensorFlow (or tf-keras) is not installed: names the extra
    ├── UnsupportedValue        (also TypeError)          a value that is not data (object arrays, ...)
    └── UsageError              (also ValueError)         the API called in a way that cannot work
        └── SeedReuseError                                 seed control: an operation seed used twice

Messages name the file, the step and the tensor where they are known, and say
what to do. Catch `TracekitError` to handle them all.
"""

from __future__ import annotations

__all__ = [
    "CorruptTrace",
    "GoldenNotFound",
    "Mismatch",
    "MissingDependency",
    "NewerFormat",
    "NotATrace",
    "RecordError",
    "RemoteError",
    "ReplayError",
    "SeedReuseError",
    "TraceFormatError",
    "TraceWriteError",
    "TracekitError",
    "UnsupportedValue",
    "UsageError",
]


class TracekitError(Exception):
    """Root of every error tracekit raises on purpose."""


class GoldenNotFound(TracekitError, FileNotFoundError):
    """No trace at the given path."""


class TraceFormatError(TracekitError, ValueError):
    """The file exists but cannot be read as a tracekit trace."""


class NotATrace(TraceFormatError):
    """The file is not a tracekit golden or journal."""


class NewerFormat(TraceFormatError):
    """The file was written in a format version this tracekit does not know."""


class CorruptTrace(TraceFormatError):
    """The file is damaged: truncated, inconsistent, or a checksum does not match."""


class TraceWriteError(TracekitError, OSError):
    """A trace cannot be written: the path exists (exclusive mode), is not writable, the disk is full."""


class RemoteError(TracekitError, OSError):
    """A golden at a URL cannot be fetched: the server does not serve byte ranges, refuses access,
    or cannot be reached. The message names the URL and what to do."""


class RecordError(TracekitError, RuntimeError):
    """A recording did not capture what it must (no training step ran, ...)."""


class ReplayError(TracekitError, RuntimeError):
    """A replay cannot go on: variables that do not map, a random tape that does not fit, ..."""


class StaleStep(ReplayError):
    """A TF2 port's tf.function was traced during an earlier replay and still reports to that one:
    each replay needs a fresh one (or the plain Python function)."""


class Mismatch(TracekitError, AssertionError):
    """A replayed trace differs from its golden beyond tolerance; the message is the report."""


class MissingDependency(TracekitError, ImportError):
    """What a command or API needs is not installed; the message names the pip extra to install."""


class UnsupportedValue(TracekitError, TypeError):
    """A value that cannot be stored as data (object arrays, arbitrary Python objects)."""


class UsageError(TracekitError, ValueError):
    """An API was called in a way that cannot work (unknown kind, step not begun, ...)."""


class SeedReuseError(UsageError):
    """Seed control in num_random_ops mode: an operation seed was used a second time."""
