"""Which Keras `tf.keras` gives a run's tests, told at collection, without importing anything.

TensorFlow 2.16 and later bind `tf.keras` to Keras 3 or, where TF_USE_LEGACY_KERAS is true when
`tf.keras` is first used, to tf-keras. tracekit.tf2 sets the variable (to tf-keras) when it is the
first to import TensorFlow. So where the variable is not set, the Keras a port gets depends on
whether a test module imports TensorFlow before tracekit does: an import-order trap, and the two
Kerases update some things differently (a sparse gradient's repeated rows, say). The plugin says
so once collection has imported the tests.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping, Optional

from ..tf_environment import keras_binding

VARIABLE = "TF_USE_LEGACY_KERAS"
_TRUE, _FALSE = ("1", "true", "True"), ("0", "false", "False")
CHOOSE = ("choose one in conftest.py, before anything imports TensorFlow: os.environ.setdefault(\"%s\", \"1\") "
          "(tf-keras: TF1's Keras, what tracekit picks) or \"0\" (Keras 3, on purpose)" % VARIABLE)


def import_order_note(environ: Mapping[str, str] = os.environ, modules: Mapping[str, Any] = sys.modules) -> Optional[str]:
    """What to tell a run whose replay tests may get another Keras than intended (None: nothing)."""
    if "tensorflow" not in modules:
        return None  # tracekit.tf2 will import it first and pick tf-keras
    wanted = environ.get(VARIABLE)
    bound = keras_binding(modules)
    if wanted in _TRUE:
        if bound == "keras_3":
            return ("tf.keras is Keras 3 although %s=%s: something used tf.keras before the variable was set, so "
                    "the ports get Keras 3; set it before TensorFlow is imported (in conftest.py's first lines, or "
                    "in the environment)" % (VARIABLE, wanted))
        return None
    if wanted in _FALSE:
        return None  # Keras 3, asked for
    if bound == "keras_3":
        return ("tf.keras is Keras 3 here (the tests imported TensorFlow and used tf.keras with %s unset), while "
                "tracekit picks tf-keras where it imports TensorFlow first: which Keras a port gets depends on "
                "import order; %s" % (VARIABLE, CHOOSE))
    if bound is None:
        return ("the tests imported TensorFlow before tracekit with %s unset, so tf.keras will be Keras 3, where "
                "tracekit picks tf-keras when it imports TensorFlow first: which Keras a port gets depends on "
                "import order; %s" % (VARIABLE, CHOOSE))
    return None
