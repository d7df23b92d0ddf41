"""Which Keras a run's tests get, told at collection: the plugin warns where import order, not
the project, chooses between tf-keras and Keras 3 (tracekit/plugin/kerases.py)."""

from __future__ import annotations

import sys
import types

from tracekit.tf_environment import keras_binding
from tracekit.plugin.kerases import import_order_note

from ..support import run_python


def _tensorflow(bound=None, lazy=True):
    """A stand-in for an imported TensorFlow whose tf.keras is still its lazy loader (bound:
    None, unused yet; else the Keras it resolved to) or the module it put in its place."""
    tf = types.ModuleType("tensorflow")
    if lazy:
        loader = types.ModuleType("keras")
        loader._tfll_initialized = bound is not None
        if bound is not None:
            loader._tfll_keras_version = bound
        tf.keras = loader
    else:
        tf.keras = types.ModuleType("tf_keras.api._v2.keras" if bound == "tf_keras" else "keras._tf_keras.keras")
    return tf


def test_the_binding_is_read_without_importing_anything():
    assert keras_binding({}) is None
    assert keras_binding({"tensorflow": _tensorflow()}) is None
    assert keras_binding({"tensorflow": _tensorflow("keras_3")}) == "keras_3"
    assert keras_binding({"tensorflow": _tensorflow("tf_keras", lazy=False)}) == "tf_keras"
    keras3 = types.SimpleNamespace(__version__="3.15.1")
    assert keras_binding({"tensorflow": _tensorflow("keras_3", lazy=False), "keras": keras3}) == "keras_3"


def test_the_note_says_when_import_order_chooses():
    unset = import_order_note({}, {"tensorflow": _tensorflow()})
    assert "imported TensorFlow before tracekit with TF_USE_LEGACY_KERAS unset" in unset and "conftest.py" in unset
    assert "tf.keras is Keras 3 here" in import_order_note({}, {"tensorflow": _tensorflow("keras_3")})
    late = import_order_note({"TF_USE_LEGACY_KERAS": "1"}, {"tensorflow": _tensorflow("keras_3")})
    assert "tf.keras is Keras 3 although TF_USE_LEGACY_KERAS=1" in late
    # chosen, and held: nothing to say; nor before anything imported TensorFlow
    assert import_order_note({"TF_USE_LEGACY_KERAS": "1"}, {"tensorflow": _tensorflow()}) is None
    assert import_order_note({"TF_USE_LEGACY_KERAS": "1"}, {"tensorflow": _tensorflow("tf_keras")}) is None
    assert import_order_note({"TF_USE_LEGACY_KERAS": "0"}, {"tensorflow": _tensorflow("keras_3")}) is None
    assert import_order_note({}, {}) is None


PROJECT_TEST = """
import tensorflow as tf   # before tracekit, the variable unset


def test_port(tracekit_replay):
    pass
"""


def test_the_plugin_warns_at_collection_where_import_order_chooses(tmp_path):
    (tmp_path / "test_port.py").write_text(PROJECT_TEST)
    (tmp_path / "goldens").mkdir()
    args = ["-m", "pytest", "-p", "no:cacheprovider", "-q", "test_port.py"]
    proc = run_python(sys.executable, args, check=False, cwd=str(tmp_path), unset=("TF_USE_LEGACY_KERAS",))
    out = proc.stdout
    assert proc.returncode == 0, out
    head, _, summary = out.partition("= tracekit =")
    assert "tracekit: WARNING the tests imported TensorFlow before tracekit with TF_USE_LEGACY_KERAS unset" in head, out
    assert "WARNING the tests imported TensorFlow" in summary  # and again in the summary block
    (tmp_path / "conftest.py").write_text('import os\nos.environ.setdefault("TF_USE_LEGACY_KERAS", "1")\n')
    proc = run_python(sys.executable, args, check=False, cwd=str(tmp_path), unset=("TF_USE_LEGACY_KERAS",))
    assert proc.returncode == 0 and "WARNING" not in proc.stdout, proc.stdout
