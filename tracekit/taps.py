"""`tracekit.tap(name, tensor)`: mark a tensor to be recorded every step under a name.

The same call works in both worlds, so taps line up by name:
- TF1 graph code (and TF2 `tf.compat.v1` graph mode): the tensor is registered in
  its graph; a recorder fetches it in every recorded step;
- TF2 eager code or a `tf.function`, or a PyTorch port's forward pass: the replayer's
  active capture (if any) takes it.
Returns the tensor unchanged, so it can wrap an expression in place.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Iterator, List, Optional, Tuple

from .errors import UsageError
from .keys import check_name

GRAPH_COLLECTION = "tracekit_taps"

# Who takes eager and tf.function taps right now (see `capturing`): (name, tensor) -> tensor.
_eager_sink: Optional[Callable[[str, Any], Any]] = None


def tap(name: str, tensor: Any) -> Any:
    """Record `tensor` under `name` in every recorded step; returns `tensor`."""
    try:
        check_name(name)
    except UsageError as exc:
        raise UsageError("tap(%r, ...): %s" % (name, exc)) from None
    tf = sys.modules.get("tensorflow")
    if tf is None or not _is_tensor(tf, tensor):
        if _is_port_array(tensor):  # a PyTorch or JAX port's: the replayer's capture takes it, if one runs
            return _eager_sink(name, tensor) if _eager_sink is not None else tensor
        raise UsageError("tap(%r, ...) needs a TensorFlow or PyTorch tensor or a JAX array, got %s; tap the output "
                         "of a layer or op" % (name, type(tensor).__name__))
    graph = getattr(tensor, "graph", None)
    if graph is not None and not _is_function_graph(graph):
        _register(graph, name, tensor)
        return tensor
    if _eager_sink is not None:
        return _eager_sink(name, tensor)
    return tensor


# Inside a tf.function, AutoGraph would convert `tap` and everything it calls, which is plain
# Python: about 0.3 s of tracing a port's step. This attribute is what
# tf.autograph.experimental.do_not_convert sets (AutoGraph calls such functions as they are);
# set here, so this module needs no TensorFlow.
tap.autograph_info__ = frozenset()  # type: ignore[attr-defined]


@contextlib.contextmanager
def capturing(sink: Callable[[str, Any], Any]) -> Iterator[None]:
    """While inside, `tap(name, tensor)` in TF2 eager code or a tf.function hands the tensor
    to `sink(name, tensor)` and returns what it returns (the replayer's capture)."""
    global _eager_sink
    previous, _eager_sink = _eager_sink, sink
    try:
        yield
    finally:
        _eager_sink = previous


def graph_taps(graph: Any) -> List[Tuple[str, Any]]:
    """The (name, tensor) pairs tapped in a TF1 graph, in the order they were tapped."""
    return list(graph.get_collection(GRAPH_COLLECTION))


def _register(graph: Any, name: str, tensor: Any) -> None:
    taps = graph.get_collection_ref(GRAPH_COLLECTION)
    for other_name, other in taps:
        if other_name == name:
            if other is tensor:
                return  # the same tap built twice (a model function called again)
            raise UsageError("tap name %r is used twice in one graph: for %s and for %s; give each tapped "
                             "tensor its own name" % (name, other.name, tensor.name))
    taps.append((name, tensor))


def _is_tensor(tf: Any, value: Any) -> bool:
    if isinstance(value, tf.Tensor):
        return True
    is_tensor = getattr(tf, "is_tensor", None)
    return bool(is_tensor and is_tensor(value) and hasattr(value, "dtype") and hasattr(value, "shape")
                and not hasattr(value, "indices"))


def _is_port_array(value: Any) -> bool:
    """A PyTorch tensor or a JAX array (traced too): the frameworks are looked up, not imported
    (the port that made `value` imported its own)."""
    torch, jax = sys.modules.get("torch"), sys.modules.get("jax")
    return (torch is not None and isinstance(value, torch.Tensor)) or (jax is not None and isinstance(value, jax.Array))


def _is_function_graph(graph: Any) -> bool:
    # TF2 tf.function bodies are traced into FuncGraphs; those taps belong to the replayer.
    return any(cls.__name__ == "FuncGraph" for cls in type(graph).__mro__)
