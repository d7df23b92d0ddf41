"""The optimizer classes a replay hooks, and what one of their calls does: the Keras optimizer
classes of every Keras the process uses (tf.keras, tf-keras, Keras 3) and tf.compat.v1.train's;
whether an apply_gradients call all-reduces over replicas, and whether an optimizer only wraps
another (a LossScaleOptimizer's inner optimizer does the update)."""

from __future__ import annotations

import inspect
import sys
from typing import Any, Callable, List, Optional

from .optimizer_terms import is_v1
from .tf_import import tf


def aggregates(optimizer: Any, original: Callable[..., Any], args: Any, kwargs: Any) -> bool:
    """Whether this apply_gradients call all-reduces the gradients over the replicas: Keras'
    unless told not to (experimental_aggregate_gradients=False, skip_gradients_aggregation=True);
    tf.compat.v1.train's and Keras 3's always."""
    if is_v1(optimizer):
        return True
    try:
        bound = inspect.signature(original).bind(optimizer, None, *args, **kwargs).arguments
    except TypeError:
        return True
    extra = bound.get("kwargs") or {}
    aggregate = bound.get("experimental_aggregate_gradients", extra.get("experimental_aggregate_gradients", True))
    return bool(aggregate) and not bool(bound.get("skip_gradients_aggregation", False))


def delegates(optimizer: Any) -> bool:
    """A wrapper (mixed precision's LossScaleOptimizer) whose inner optimizer does the update:
    the inner one reports."""
    return getattr(optimizer, "inner_optimizer", None) is not None


def optimizer_modules() -> List[Any]:
    """The Keras optimizer modules a model may use: tf.keras's, and tf-keras and Keras 3 when the
    process imported them (a user's model exists before the replay, so its Keras is imported)."""
    modules = [tf.keras.optimizers]
    for name in ("tf_keras", "keras"):
        package = sys.modules.get(name)
        optimizers = getattr(package, "optimizers", None) if package is not None else None
        if optimizers is not None and all(optimizers is not m for m in modules):
            modules.append(optimizers)
    return modules


def optimizer_classes(method: str) -> List[Any]:
    """The optimizer classes that define `method`: Keras' (new and legacy, every Keras in use)
    and tf.compat.v1.train's."""
    out = []
    bases = [(getattr(optimizers, "Optimizer", None), getattr(getattr(optimizers, "legacy", None), "Optimizer", None))
             for optimizers in optimizer_modules()]
    for group in bases + [(tf.compat.v1.train.Optimizer,)]:
        for cls in group:
            if cls is None:
                continue
            for base in cls.__mro__:  # patch where the method is defined
                if method in base.__dict__:
                    if base not in out:
                        out.append(base)
                    break
    return out


_KERASES = {"keras": "Keras", "tf_keras": "tf-keras"}


def keras_of(obj: Any) -> Optional[str]:
    """Which Keras a port's model or optimizer comes from, with its version ("Keras 3.13.1",
    "tf-keras 2.21.0"); "tf.compat.v1" for TensorFlow's own (tf.compat.v1.train's optimizers,
    a tf.Module), None for none of them (a hand-written optimizer) or for None. A subclass is
    judged by the first class of its MRO that one of them defines."""
    if obj is None:
        return None
    for cls in type(obj).__mro__:
        root = (cls.__module__ or "").split(".")[0]
        if root in _KERASES:
            version = getattr(sys.modules.get(root), "__version__", "?")
            return "%s %s" % (_KERASES[root], version)
        if root == "tensorflow" and cls is not object:
            return "tf.compat.v1" if is_v1(obj) else "TensorFlow %s" % cls.__name__
    return None
