"""Recording legacy TF1 training (TF 1.15, or TF 2.x `tf.compat.v1` graph mode) into goldens.

Runs in the legacy environment: Python 3.7 syntax. See recorder.py for how steps
are found and what each records; tracekit.tf1.record is the entry point. Importing this package before TensorFlow selects
the legacy Keras 2 (tf-keras) on TF >= 2.16, as TF1-style code needs it.
"""

import os
import sys

if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from .recorder import Recorder, StopRecording  # noqa: E402
from .seeds import SeedMode, SeedReuseError  # noqa: E402

__all__ = ["Recorder", "SeedMode", "SeedReuseError", "StopRecording"]
