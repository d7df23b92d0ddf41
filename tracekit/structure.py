"""Input structures: how a TF1 program's input tensors were grouped when it got them.

A tf.data element is a nest of tuples and dicts (`(features, labels)`, `{"color": ...}`);
an Estimator's model_fn gets `features` and `labels`. The recorder keeps, beside the flat
input tensors (`input/IteratorGetNext:0`, ...), each such structure with its leaves named by
those tensors, in a form msgpack stores: a leaf is the tensor's name, a dict
{"dict": {key: structure}}, a tuple or list {"tuple": [structure, ...]}. A replay rebuilds
it from the step's tensors, so a port reads `inputs["features"]["color"]`. No TensorFlow
here. Python 3.7 syntax.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping

# The structures a golden may hold (meta "inputs"), by what the program called them.
ELEMENT = "element"  # what an iterator's get_next() returned
FEATURES, LABELS = "features", "labels"  # what an Estimator's input_fn gave its model_fn


def encode(value: Any, name_of: Callable[[Any], str]) -> Any:
    """A nest of tuples, lists and dicts of tensors -> its stored form (`name_of`: a leaf's name)."""
    if isinstance(value, Mapping):
        return {"dict": {str(key): encode(item, name_of) for key, item in value.items()}}
    if isinstance(value, (tuple, list)):
        return {"tuple": [encode(item, name_of) for item in value]}
    return name_of(value)


def leaves(stored: Any) -> List[str]:
    """The tensor names a stored structure holds, in order."""
    if isinstance(stored, dict) and "dict" in stored:
        return [name for item in stored["dict"].values() for name in leaves(item)]
    if isinstance(stored, dict) and "tuple" in stored:
        return [name for item in stored["tuple"] for name in leaves(item)]
    return [stored] if isinstance(stored, str) else []


def rebuild(stored: Any, values: Mapping[str, Any]) -> Any:
    """The structure with each leaf name replaced by its value in `values`."""
    if isinstance(stored, dict) and "dict" in stored:
        return {key: rebuild(item, values) for key, item in stored["dict"].items()}
    if isinstance(stored, dict) and "tuple" in stored:
        return tuple(rebuild(item, values) for item in stored["tuple"])
    return values[stored]


def structured(inputs: Dict[str, Any], structures: Any) -> Dict[str, Any]:
    """A step's inputs {golden input name: value} with each structure the golden recorded
    (`structures`: meta "inputs", {name: stored form}) added under its name, where the step
    holds all its leaves; the flat names stay."""
    out = dict(inputs)
    if isinstance(structures, dict):
        for name, stored in structures.items():
            names = leaves(stored)
            if names and name not in out and all(n in inputs for n in names):
                out[name] = rebuild(stored, inputs)
    return out
