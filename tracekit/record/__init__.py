"""Recording legacy TF1 training (TF 1.15, or TF 2.x `tf.compat.v1` graph mode) into goldens.

Runs in the legacy environment: Python 3.7 syntax. See recorder.py for how steps
are found and what each records.
"""

from .recorder import Recorder, StopRecording, record
from .seeds import SeedMode, SeedReuseError

__all__ = ["Recorder", "SeedMode", "SeedReuseError", "StopRecording", "record"]
