"""Input interception: the structure a TF1 program's inputs came in.

While a recorder is active, an iterator's `get_next()` (tf.data, whatever made the iterator)
notes the element's structure in its graph, and an Estimator's reading of its input_fn notes
the features and labels it hands its model_fn (queue-fed input functions included). graph.py
keeps the structures whose tensors a training run reads (structure.py's stored form).
"""

from __future__ import annotations

import importlib
from typing import Any, List

from ..structure import ELEMENT, FEATURES, LABELS, encode
from .notes import note_intercepted
from .patching import Patches, Target, noting

_ESTIMATOR_MODULE = "tensorflow_estimator.python.estimator.estimator"


def _targets(tf: Any) -> List[Target]:
    """An iterator's get_next, and the Estimator's reading of its input_fn where there is one."""
    out: List[Target] = []
    iterator = getattr(getattr(tf.compat.v1, "data", None), "Iterator", None)
    if iterator is not None:
        out.append((iterator, "get_next", lambda original: noting(original, lambda a, k, r: _note(ELEMENT, r))))
    try:
        estimator = importlib.import_module(_ESTIMATOR_MODULE).Estimator
    except Exception:  # TensorFlow without tf.estimator (2.16 and later)
        estimator = None
    if estimator is not None:
        out.append((estimator, "_get_features_and_labels_from_input_fn",
                    lambda original: noting(original, lambda a, k, r: _note_features(r))))
    return out


_patches = Patches(_targets)
install, uninstall = _patches.install, _patches.uninstall  # nested recorders: the last to leave restores


def _note(name: str, value: Any) -> None:
    tensors = []

    def name_of(leaf: Any) -> str:
        if not hasattr(leaf, "graph") or not hasattr(leaf, "op"):
            raise TypeError("not a graph tensor")  # eager values, sparse tensors: not noted
        tensors.append(leaf)
        return leaf.name
    stored = encode(value, name_of)
    if tensors:
        note_intercepted(tensors[0].graph, "structure", (name, stored))


def _note_features(result: Any) -> None:
    features, labels = result[0], result[1]
    _note(FEATURES, features)
    if labels is not None:
        _note(LABELS, labels)
