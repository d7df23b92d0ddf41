"""TensorFlow, imported for the replay: tf-keras (Keras 2) is selected first.

TF >= 2.16 binds `tf.keras` to Keras 3 unless TF_USE_LEGACY_KERAS is true when
`tf.keras` is first used; TF1-style layers and the Keras 2 optimizers whose slots the
replay maps need tf-keras. A process that imported TensorFlow already keeps its choice
(its code imported TensorFlow on its own terms), as does one that set the variable: the
pytest plugin warns where that choice is import order's (plugin/kerases.py).
"""

from __future__ import annotations

import importlib.util
import os
import sys

from ..errors import MissingDependency

INSTALL = "pip install 'tracekit[tf2]' (TensorFlow 2 and tf-keras of the same minor version)"

if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

try:
    import tensorflow as tf
except ImportError as exc:
    raise MissingDependency("tracekit.tf2 replays on TensorFlow 2, which does not import here (%s): %s"
                            % (exc, INSTALL)) from None

# Keras 2 was asked for, and TF >= 2.16 finds it only in the tf-keras package: say so now, not
# at the first tf.keras attribute a model touches.
if os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true") and \
        tuple(int(p) for p in tf.__version__.split(".")[:2] if p.isdigit()) >= (2, 16) and \
        importlib.util.find_spec("tf_keras") is None:
    raise MissingDependency("TF_USE_LEGACY_KERAS=1 selects Keras 2, but tf-keras is not installed: %s" % INSTALL)

__all__ = ["tf"]
