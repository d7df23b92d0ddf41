"""tracekit for legacy TF1 code: `tracekit.tf1.record(...)`.

Imports TensorFlow. On TF >= 2.16 the legacy Keras 2 (tf-keras) is selected
before the first TensorFlow import, as `tf.compat.v1.layers` needs it.
"""

import os
import sys

if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from .record import Recorder, SeedMode, SeedReuseError, StopRecording, record  # noqa: E402
from .tap import tap  # noqa: E402

__all__ = ["Recorder", "SeedMode", "SeedReuseError", "StopRecording", "record", "tap"]
