"""Input interception: the structure a TF1 program's inputs came in.

While a recorder is active, an iterator's `get_next()` (tf.data, whatever made the iterator)
notes the element's structure in its graph, and an Estimator's reading of its input_fn notes
the features and labels it hands its model_fn (queue-fed input functions included). graph.py
keeps the structures whose tensors a training run reads (structure.py's stored form).
"""

from __future__ import annotations

import functools
import importlib
from typing import Any, Callable, List, Tuple

from ..structure import ELEMENT, FEATURES, LABELS, encode
from .graph import note_intercepted

_installed: List[Tuple[Any, str, Callable[..., Any]]] = []
_depth = 0
_ESTIMATOR_MODULE = "tensorflow_estimator.python.estimator.estimator"


def install(tf: Any) -> None:
    """Patch get_next and the Estimator's input reading (nested calls are counted; `uninstall`
    undoes the last)."""
    global _depth
    _depth += 1
    if _depth > 1:
        return
    targets = []
    iterator = getattr(getattr(getattr(tf, "compat", None), "v1", None), "data", None)
    iterator = getattr(iterator, "Iterator", None)
    if iterator is not None and "get_next" in iterator.__dict__:
        targets.append((iterator, "get_next", _note_element))
    try:
        estimator = importlib.import_module(_ESTIMATOR_MODULE).Estimator
    except Exception:  # TensorFlow without tf.estimator (2.16 and later)
        estimator = None
    if estimator is not None and "_get_features_and_labels_from_input_fn" in estimator.__dict__:
        targets.append((estimator, "_get_features_and_labels_from_input_fn", _note_features))
    for owner, name, note in targets:
        original = owner.__dict__[name]
        _installed.append((owner, name, original))
        setattr(owner, name, _wrap(original, note))


def uninstall() -> None:
    global _depth
    _depth = max(0, _depth - 1)
    if _depth:
        return
    while _installed:
        owner, name, original = _installed.pop()
        setattr(owner, name, original)


def _wrap(original: Callable[..., Any], note: Callable[[Any], None]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        try:
            note(result)
        except Exception:  # noting must never break the user's graph construction
            pass
        return result
    return wrapper


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


def _note_element(result: Any) -> None:
    _note(ELEMENT, result)


def _note_features(result: Any) -> None:
    features, labels = result[0], result[1]
    _note(FEATURES, features)
    if labels is not None:
        _note(LABELS, labels)
