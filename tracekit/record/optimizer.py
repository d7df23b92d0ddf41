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
import inspect
import numbers
import sys
import threading
from typing import Any, Callable, List, Tuple

from .notes import note_intercepted
from .paths import Applied
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
    # A wrapper optimizer (a loss scale's, a custom one) differentiates through the one it wraps: its
    # own compute_gradients is the program's call, noted; the inner call it makes is not
    out += [(cls, "compute_gradients", functools.partial(_method, "compute_gradients"))
            for cls in _subclasses(tf.compat.v1.train.Optimizer) if "compute_gradients" in vars(cls)]
    out += [(module, name, functools.partial(noting, note=note)) for module in (tf, tf.compat.v1)
            for name, note in (("gradients", _note_gradients), ("clip_by_global_norm", _note_clipped))]
    # Each variable's update: apply_gradients hands it to a processor (one class per kind of
    # variable), which calls the optimizer's method; rows are summed by a function of the module.
    module = sys.modules.get(tf.compat.v1.train.Optimizer.__module__)
    for name, owner in sorted(vars(module).items() if module is not None else ()):
        if inspect.isclass(owner) and name.endswith("Processor") and "update_op" in vars(owner):
            out.append((owner, "update_op", _applying))
    if module is not None and callable(getattr(module, "_deduplicate_indexed_slices", None)):
        out.append((module, "_deduplicate_indexed_slices", _summing))
    return out


def _method(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    if name == "apply_gradients":
        return noting(original, lambda args, kwargs, result: _note(name, args[0], args[1:], kwargs, result))

    @functools.wraps(original)
    def differentiate(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_building, "differentiating", 0)
        _building.differentiating = depth + 1
        try:
            result = original(*args, **kwargs)
        finally:
            _building.differentiating = depth
        if not depth:  # the program's own call, not one a wrapper optimizer makes of the optimizer it wraps
            try:
                _note(name, args[0], args[1:], kwargs, result)
            except Exception:  # noting must never break the user's graph construction
                pass
        return result
    return differentiate


def _subclasses(cls: type) -> List[type]:
    """Every subclass of `cls` imported so far, once."""
    out: List[type] = []
    stack = list(cls.__subclasses__())
    while stack:
        found = stack.pop()
        if found not in out:
            out.append(found)
            stack.extend(found.__subclasses__())
    return out


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


_building = threading.local()  # per thread: the updates being built (Applied notes, innermost last), differentiation depth
# The method a processor calls for a gradient, by (sparse, resource variable); where the optimizer
# does not override the sparse one, it sums rows by index and calls the second.
_ENTRIES = {(False, False): ("_apply_dense", None), (False, True): ("_resource_apply_dense", None),
            (True, False): ("_apply_sparse_duplicate_indices", "_apply_sparse"),
            (True, True): ("_resource_apply_sparse_duplicate_indices", "_resource_apply_sparse")}


def _applying(original: Callable[..., Any]) -> Callable[..., Any]:
    """A processor's update_op(optimizer, gradient), noting the update it builds (paths.Applied)."""
    @functools.wraps(original)
    def update_op(self: Any, optimizer: Any, grad: Any) -> Any:
        try:
            applied = _begin(self, optimizer, grad)
        except Exception:  # noting must never break the user's graph construction
            applied = None
        if applied is None:
            return original(self, optimizer, grad)
        stack = _building.__dict__.setdefault("stack", [])
        stack.append(applied)
        try:
            result = original(self, optimizer, grad)
        finally:
            stack.pop()
        applied.last = applied.var.graph.version
        note_intercepted(applied.var.graph, "applied", applied)
        return result
    return update_op


def _begin(processor: Any, optimizer: Any, grad: Any) -> Any:
    var = getattr(processor, "_v", None)
    graph = getattr(var, "graph", None)
    if graph is None or not isinstance(getattr(var, "name", None), str) or getattr(grad, "graph", None) is not graph:
        return None
    sparse, resource = hasattr(grad, "indices"), "Resource" in type(processor).__name__
    method, definers = _builder(type(optimizer), *_ENTRIES[(sparse, resource)])
    slots = {}
    for name in optimizer.get_slot_names():
        slot = optimizer.get_slot(var, name)
        if slot is not None:
            slots[name] = slot
    state = {name: v for (name, g), v in getattr(optimizer, "_non_slot_dict", {}).items() if g is graph}
    scalars = {name: value for name, value in vars(optimizer).items()
               if (getattr(value, "graph", None) is graph and hasattr(value, "op"))
               or (isinstance(value, numbers.Real) and not isinstance(value, bool))
               or (name == "_skip_list" and isinstance(value, (list, tuple)))}
    return Applied(optimizer, var, grad, resource, method, definers, graph.version, slots=slots, state=state,
                   scalars=scalars)


def _builder(cls: type, entry: str, summed: Any) -> Tuple[str, Tuple[str, ...]]:
    """The method that builds the update and the classes that define it ("module.Class", in
    method-resolution order, the base Optimizer's own abstract one left out)."""
    base = [c for c in cls.__mro__ if c.__name__ == "Optimizer" and entry in vars(c)]
    definers = [c for c in cls.__mro__ if entry in vars(c) and c not in base]
    if not definers and summed is not None:  # the base class sums the rows, then calls this one
        entry = summed
        definers = [c for c in cls.__mro__ if summed in vars(c) and c.__name__ != "Optimizer"]
    return entry, tuple("%s.%s" % (c.__module__, c.__name__) for c in definers)


def _summing(original: Callable[..., Any]) -> Callable[..., Any]:
    """The module's _deduplicate_indexed_slices(values, indices): the rows an update consumes."""
    @functools.wraps(original)
    def deduplicate(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        stack = getattr(_building, "stack", None)
        if stack:
            stack[-1].consumed = result
        return result
    return deduplicate
