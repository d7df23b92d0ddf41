"""tracekit: record TF1 training runs once into golden traces; prove TF2 ports train the same.

    import tracekit
    with tracekit.open("goldens/seed_example.h5") as golden:
        golden.step(0)["loss/loss"]

The store, its CLI's read-only commands and the comparison never import
TensorFlow; the recorder (`tracekit.tf1`) and the replayer (`tracekit.tf2`) do.
"""

from __future__ import annotations

from ._version import __version__
from .errors import (CorruptTrace, GoldenNotFound, NewerFormat, NotATrace, RecordError, TraceFormatError,
                     TracekitError, TraceWriteError, UnsupportedValue, UsageError)
from .store import Kind, Series, Step, TensorInfo, Trace, TraceWriter, create, recover, verify
from .store import open_trace as open  # noqa: A001  # tracekit.open(path), like h5py.File / io.open
from .tap import tap

__all__ = [
    "CorruptTrace",
    "GoldenNotFound",
    "Kind",
    "NewerFormat",
    "NotATrace",
    "RecordError",
    "Series",
    "Step",
    "TensorInfo",
    "Trace",
    "TraceFormatError",
    "TraceWriteError",
    "TraceWriter",
    "TracekitError",
    "UnsupportedValue",
    "UsageError",
    "__version__",
    "create",
    "open",
    "recover",
    "tap",
    "verify",
]
