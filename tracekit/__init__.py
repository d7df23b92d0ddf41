"""tracekit: record TF1 training runs once into golden traces; prove TF2 ports train the same.

    import tracekit
    with tracekit.open("goldens/seed_example.h5") as golden:
        golden.step(0)["loss/loss"]

The store, its CLI's read-only commands and the comparison never import
TensorFlow; the recorder (`tracekit.tf1`) and the replayer (`tracekit.tf2`) do.
"""

from __future__ import annotations

from ._version import __version__
from .comparison import Comparison, Tolerance
from .errors import (CorruptTrace, GoldenNotFound, Mismatch, NewerFormat, NotATrace, RecordError, ReplayError,
                     TraceFormatError, TracekitError, TraceWriteError, UnsupportedValue, UsageError)
from .store import Kind, Series, Step, TensorInfo, Trace, TraceWriter, create, recover, verify
from .store import open_trace as open  # noqa: A001  # tracekit.open(path), like h5py.File / io.open
from .report.reported import compare
from .report.terminal import Progress
from .taps import tap

__all__ = [
    "Comparison",
    "CorruptTrace",
    "GoldenNotFound",
    "Kind",
    "Mismatch",
    "NewerFormat",
    "NotATrace",
    "Progress",
    "RecordError",
    "ReplayError",
    "Series",
    "Step",
    "TensorInfo",
    "Tolerance",
    "Trace",
    "TraceFormatError",
    "TraceWriteError",
    "TraceWriter",
    "TracekitError",
    "UnsupportedValue",
    "UsageError",
    "__version__",
    "compare",
    "create",
    "open",
    "recover",
    "tap",
    "verify",
]
