"""TensorFlow, imported for the replay: tf-keras (Keras 2) is selected first.

TF >= 2.16 binds `tf.keras` to Keras 3 unless TF_USE_LEGACY_KERAS is set before
TensorFlow's first import; TF1-style layers and the Keras 2 optimizers whose slots
the replay maps need tf-keras. A process that imported TensorFlow already keeps
its choice.
"""

from __future__ import annotations

import os
import sys

if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf  # noqa: E402

__all__ = ["tf"]
