"""tracekit for legacy TF1 code: `tracekit.tf1.record(...)` (see tracekit.record)."""

from .record import Recorder, SeedMode, SeedReuseError, StopRecording, record
from .taps import tap

__all__ = ["Recorder", "SeedMode", "SeedReuseError", "StopRecording", "record", "tap"]
