"""What the program does with its random draws, where the graph says: a dropout's rate.

TF1's dropout (tf.nn.dropout, tf.layers.dropout, TF1 Keras' Dropout, slim's) keeps a unit where
its uniform draw is at least the rate (`u >= rate`, TF 1.13 and later), or where
`floor(keep_prob + u)` is 1 (before). A replay feeds the port the same draws; a port that drops
at another rate keeps other units, and only the rate says why. The golden keeps each draw's
rate (meta["draws"]: {"random/<tensor>": {"use": "dropout", "rate": r}}), read from the graph's
constants (a rate computed at run time is not kept). Python 3.7 syntax, TensorFlow's graph only.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional

from ..keys import make_key
from .walk import constant

# Ops a uniform draw passes through unchanged on its way to the comparison (scaled by 1, moved by 0).
_THROUGH = ("Identity", "Mul", "Add", "AddV2")


def draw_uses(tf: Any, draws: Iterable[Any]) -> Dict[str, Dict[str, Any]]:
    """{"random/<tensor>": {"use": "dropout", "rate": r}} for each draw (a random op's output
    tensor) that a dropout's mask compares with a constant rate."""
    out = {}
    for tensor in draws:
        rate = _dropout_rate(tf, tensor)
        if rate is not None:
            out[make_key("random", tensor.name)] = {"use": "dropout", "rate": rate}
    return out


def _dropout_rate(tf: Any, tensor: Any, depth: int = 4) -> Optional[float]:
    for consumer in tensor.consumers():
        other = [t for t in consumer.inputs if t is not tensor]
        if consumer.type == "GreaterEqual" and consumer.inputs[0] is tensor and len(other) == 1:
            return constant(tf, other[0])  # u >= rate
        if consumer.type in ("Add", "AddV2") and len(other) == 1 and depth:
            shift = _value(tf, other[0])
            if shift is not None and any(c.type == "Floor" for c in consumer.outputs[0].consumers()):
                return 1.0 - shift  # floor(keep_prob + u)
        if consumer.type in _THROUGH and len(other) <= 1 and depth:
            value = _value(tf, other[0]) if other else None
            neutral = not other or value == (1.0 if consumer.type == "Mul" else 0.0)
            if neutral:
                found = _dropout_rate(tf, consumer.outputs[0], depth - 1)
                if found is not None:
                    return found
    return None


def _value(tf: Any, tensor: Any) -> Optional[float]:
    """A scalar the graph fixes, a difference of two included (random_uniform's maxval - minval)."""
    value = constant(tf, tensor)
    if value is None and tensor.op.type == "Sub" and len(tensor.op.inputs) == 2:
        a, b = (constant(tf, t) for t in tensor.op.inputs)
        value = None if a is None or b is None else a - b
    return value
