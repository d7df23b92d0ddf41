"""Values that are structures (lists, tuples, dicts, namedtuples of leaves, and None) split into
a msgpack-able spec and their leaves (values.py), and put back together from them. A spec is
["leaf"], ["none"], ["list", [...]], ["tuple", [...]], ["dict", [[key, child], ...]] or
["namedtuple", typename, [fields], [...]]. Python 3.7 syntax.
"""

from __future__ import annotations

import collections
from typing import Any, Dict, List, Optional, Tuple

from ..errors import UnsupportedValue
from .values import is_leaf

MAX_DEPTH = 64
# A namedtuple type is made anew for each (name, fields) a file holds: Python takes seconds to
# make one of 200,000 fields, so a file may not ask for more than any real one has.
MAX_FIELDS = 4096

KEY_TYPES = (str, bytes, int, float, bool, type(None))  # dict keys a structure may have


def flatten(value: Any, where: str) -> Tuple[Optional[list], List[Any]]:
    """Split a value into (structure spec or None for a bare leaf, leaves in order)."""
    if is_leaf(value):
        return None, [value]
    leaves: List[Any] = []
    spec = _flatten(value, leaves, where, 0)
    return spec, leaves


def _flatten(value: Any, leaves: List[Any], where: str, depth: int) -> list:
    if depth > MAX_DEPTH:
        raise UnsupportedValue("%s: structure nested deeper than %d levels" % (where, MAX_DEPTH))
    if is_leaf(value):
        leaves.append(value)
        return ["leaf"]
    if value is None:
        return ["none"]
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        if len(value._fields) > MAX_FIELDS:
            raise UnsupportedValue("%s: a namedtuple of %d fields (at most %d); store it as a dict"
                                   % (where, len(value._fields), MAX_FIELDS))
        children = [_flatten(v, leaves, where, depth + 1) for v in value]
        return ["namedtuple", type(value).__name__, list(value._fields), children]
    if isinstance(value, (list, tuple)):
        children = [_flatten(v, leaves, where, depth + 1) for v in value]
        return ["list" if isinstance(value, list) else "tuple", children]
    if isinstance(value, collections.abc.Mapping):
        items = []
        for key, child in value.items():
            if not isinstance(key, KEY_TYPES):
                raise UnsupportedValue(
                    "%s: dict key %r of type %s cannot be stored; use str or int keys"
                    % (where, key, type(key).__name__))
            items.append([key, _flatten(child, leaves, where, depth + 1)])
        return ["dict", items]
    raise UnsupportedValue(
        "%s: cannot store a %s; store numpy arrays, scalars, bytes or str, or "
        "dicts/lists/tuples of them" % (where, type(value).__name__)
    )


def leaf_count(spec: Optional[list]) -> int:
    """How many leaves a value of structure `spec` holds (a bare leaf: 1; None, [] or {}: 0);
    ValueError for what flatten never writes."""
    if spec is None:
        return 1
    count, todo = 0, [(spec, 0)]
    while todo:
        node, depth = todo.pop()
        if depth > MAX_DEPTH or not isinstance(node, (list, tuple)) or not node:
            raise ValueError("structure %.100r is not one tracekit writes" % (node,))
        tag = node[0]
        if tag == "leaf":
            count += 1
        elif tag in ("list", "tuple", "dict", "namedtuple") and len(node) == (4 if tag == "namedtuple" else 2):
            children = node[-1]
            if not isinstance(children, (list, tuple)):
                raise ValueError("structure %.100r is not one tracekit writes" % (node,))
            for child in children:
                if tag == "dict":
                    if not isinstance(child, (list, tuple)) or len(child) != 2:
                        raise ValueError("dict entry %.100r is not [key, child]" % (child,))
                    child = child[1]
                todo.append((child, depth + 1))
        elif tag != "none":
            raise ValueError("structure %.100r is not one tracekit writes" % (node,))
    return count


_namedtuples: Dict[Tuple[str, Tuple[str, ...]], Any] = {}


def unflatten(spec: Optional[list], leaves: List[Any]) -> Any:
    if spec is None:
        if len(leaves) != 1:
            raise ValueError("a bare value has exactly one leaf")
        return leaves[0]
    it = iter(leaves)
    value = _unflatten(spec, it, 0)
    if next(it, it) is not it:
        raise ValueError("structure has fewer leaves than stored")
    return value


def _unflatten(spec: list, it: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise ValueError("structure nested deeper than %d levels" % MAX_DEPTH)
    tag = spec[0]
    depth += 1
    if tag == "leaf":
        try:
            return next(it)
        except StopIteration:
            raise ValueError("structure has more leaves than stored") from None
    if tag == "none":
        return None
    if tag in ("list", "tuple"):
        children = [_unflatten(c, it, depth) for c in spec[1]]
        return children if tag == "list" else tuple(children)
    if tag == "dict":
        return {key: _unflatten(child, it, depth) for key, child in spec[1]}
    if tag == "namedtuple":
        typename, fields, children = spec[1], tuple(spec[2]), spec[3]
        if len(fields) > MAX_FIELDS:
            raise ValueError("a namedtuple of %d fields (tracekit writes at most %d)" % (len(fields), MAX_FIELDS))
        cls = _namedtuples.get((typename, fields))
        if cls is None:
            cls = _namedtuples[(typename, fields)] = collections.namedtuple(typename, fields)
        return cls(*[_unflatten(c, it, depth) for c in children])
    raise ValueError("unknown structure tag %r" % (tag,))


