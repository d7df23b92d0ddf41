"""Optimizer interception: what the graph alone cannot tell.

While a recorder is active, `compute_gradients` / `apply_gradients` (and so
`minimize`) of `tf.compat.v1.train.Optimizer`, and `get_gradients` /
`apply_gradients` of Keras optimizers, note in their graph the loss they differentiate,
the gradient of each variable, the train op they return and the optimizer's own variables
(slots, Adam's beta powers); `tf.gradients` notes each variable's gradient and the tensor
it differentiated (the loss: what the program hands over is what was differentiated,
whatever the gradient graph's shape), and `tf.clip_by_global_norm` what it made of each
gradient, for hand-written updates (updates.py). graph.py reads these notes; it also finds
gradients and learning rates of optimizer update ops without them.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, List

from .graph import note_intercepted
from .patching import Patches, Target, noting

def _targets(tf: Any) -> List[Target]:
    """The optimizer classes' methods (where each class defines them), tf.gradients and
    tf.clip_by_global_norm."""
    classes = [tf.compat.v1.train.Optimizer]
    optimizers = getattr(getattr(tf, "keras", None), "optimizers", None)
    for keras_class in (getattr(optimizers, "Optimizer", None),
                        getattr(getattr(optimizers, "legacy", None), "Optimizer", None)):  # tf-keras 2.x
        if keras_class is not None and keras_class not in classes:
            classes.append(keras_class)
    out: List[Target] = [(cls, name, functools.partial(_method, name)) for cls in classes
                         for name in ("compute_gradients", "get_gradients", "apply_gradients")]
    out += [(module, name, functools.partial(noting, note=note)) for module in (tf, tf.compat.v1)
            for name, note in (("gradients", _note_gradients), ("clip_by_global_norm", _note_clipped))]
    return out


def _method(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    return noting(original, lambda args, kwargs, result: _note(name, args[0], args[1:], kwargs, result))


_patches = Patches(_targets)
install, uninstall = _patches.install, _patches.uninstall  # nested recorders: the last to leave restores


def _gradient(variable: Any, grad: Any, loss: Any = None) -> None:
    """Note a variable's gradient, and the loss it is the gradient of: a dense tensor, or
    IndexedSlices (an embedding's rows, which a hand-written update reads converted to a dense
    tensor; an optimizer's sparse update op takes them as they are)."""
    graph = getattr(grad, "graph", None)
    name = getattr(variable, "name", None)
    if graph is None or not isinstance(name, str):
        return
    if hasattr(grad, "indices"):
        note_intercepted(graph, "sparse", (name, grad))
    elif hasattr(grad, "op"):
        note_intercepted(graph, "gradient", (name, grad))
    else:
        return
    if loss is not None:
        note_intercepted(graph, "derivative", (name, grad, loss))


def _single(ys: Any) -> Any:
    """The one tensor differentiated (None when several are: their sum is, which no tensor holds)."""
    if isinstance(ys, (list, tuple)):
        ys = ys[0] if len(ys) == 1 else None
    return ys if hasattr(ys, "op") and hasattr(ys, "graph") else None


def _note_gradients(args: tuple, kwargs: dict, result: Any) -> None:
    loss = _single(args[0] if args else kwargs.get("ys"))
    xs = args[1] if len(args) > 1 else kwargs.get("xs")
    for variable, grad in zip(xs if isinstance(xs, (list, tuple)) else [xs], result):
        _gradient(variable, grad, loss)


def _note_clipped(args: tuple, kwargs: dict, result: Any) -> None:
    before = args[0] if args else kwargs.get("t_list")
    for grad, after in zip(before, result[0]):
        graph = getattr(after, "graph", None)
        if graph is not None and hasattr(grad, "op") and hasattr(after, "op"):
            note_intercepted(graph, "clipped", (grad, after))


def _note(name: str, optimizer: Any, args: tuple, kwargs: dict, result: Any) -> None:
    if name in ("compute_gradients", "get_gradients"):
        loss = _single(args[0] if args else kwargs.get("loss"))  # a tensor, not a callable (eager)
        if loss is not None:
            note_intercepted(loss.graph, "loss", loss)
        if name == "compute_gradients":
            for grad, variable in result:
                _gradient(variable, grad, loss)
        else:
            params = args[1] if len(args) > 1 else kwargs.get("params")
            for variable, grad in zip(params or [], result):
                _gradient(variable, grad, loss)
        return
    graph = getattr(result, "graph", None)
    if graph is None or not hasattr(result, "type"):  # an op in a graph
        return
    note_intercepted(graph, "train_op", result)
    variables = getattr(optimizer, "variables", None)
    for variable in (variables() if callable(variables) else getattr(optimizer, "weights", [])):
        note_intercepted(graph, "slot", variable)
