"""The catalog: one entry per recorded tensor (kind, name), summed over the steps."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

from ..keys import INITIAL_STEP, KIND_ORDER, make_key
from . import values


class TensorInfo:
    """What a trace holds of one tensor: shape and dtype (None/"structure" when they
    vary or the value is a structure), how many steps have it, and its sizes."""

    __slots__ = ("kind", "name", "shape", "dtype", "steps", "initial", "raw_bytes", "stored_bytes")

    def __init__(self, kind: str, name: str, shape: Optional[Tuple[int, ...]], dtype: str,
                 steps: int = 0, initial: bool = False, raw_bytes: int = 0, stored_bytes: int = 0) -> None:
        self.kind = kind
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.steps = steps
        self.initial = initial
        self.raw_bytes = raw_bytes
        self.stored_bytes = stored_bytes

    @property
    def key(self) -> str:
        return make_key(self.kind, self.name)

    @property
    def ratio(self) -> float:
        return self.raw_bytes / self.stored_bytes if self.stored_bytes else 1.0

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "name": self.name,
                "shape": None if self.shape is None else list(self.shape), "dtype": self.dtype,
                "steps": self.steps, "initial": self.initial, "raw_bytes": self.raw_bytes,
                "stored_bytes": self.stored_bytes}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "TensorInfo":
        shape = d.get("shape")
        return cls(str(d["kind"]), str(d["name"]), None if shape is None else tuple(int(x) for x in shape),
                   str(d.get("dtype", "?")), int(d.get("steps", 0)), bool(d.get("initial", False)),
                   int(d.get("raw_bytes", 0)), int(d.get("stored_bytes", 0)))

    def __repr__(self) -> str:
        return "TensorInfo(%s, shape=%s, dtype=%s, steps=%d)" % (self.key, self.shape, self.dtype, self.steps)


def leaf_dtype_name(dtype: str, logical: Optional[str]) -> str:
    if logical == values.LOGICAL_BYTES:
        return "bytes"
    if logical == values.LOGICAL_STR:
        return "str"
    if logical is not None:
        return logical
    return np.dtype(dtype).name


def leaf_sizes(desc: Dict[str, Any]) -> Tuple[int, int]:
    """(raw, stored) bytes of one leaf descriptor."""
    raw = int(np.dtype(desc["dt"]).itemsize * int(np.prod(desc["sh"], dtype=np.int64)))
    if desc["l"] == values.CHUNKED:
        return raw, sum(int(c[2]) for c in desc["cs"])
    return raw, raw


class CatalogBuilder:
    """Collects TensorInfo entries in first-seen order, data-flow order by kind."""

    def __init__(self) -> None:
        self._entries: Dict[Tuple[str, str], TensorInfo] = {}

    def add(self, step: int, kind: str, name: str, spec: Optional[list],
            leaves: Iterable[Dict[str, Any]]) -> None:
        leaves = list(leaves)
        if spec is None and len(leaves) == 1:
            shape: Optional[Tuple[int, ...]] = tuple(leaves[0].get("ls", leaves[0]["sh"]))
            dtype = leaf_dtype_name(leaves[0]["dt"], leaves[0].get("lg"))
        else:
            shape, dtype = None, "structure"
        info = self._entries.get((kind, name))
        if info is None:
            info = self._entries[(kind, name)] = TensorInfo(kind, name, shape, dtype)
        elif info.shape != shape or info.dtype != dtype:
            info.shape = None  # it varies across steps
            if info.dtype != dtype:
                info.dtype = "varies"
        if step == INITIAL_STEP:
            info.initial = True
        else:
            info.steps += 1
        for desc in leaves:
            raw, stored = leaf_sizes(desc)
            info.raw_bytes += raw
            info.stored_bytes += stored

    def entries(self) -> List[TensorInfo]:
        order = {key: i for i, key in enumerate(self._entries)}
        return sorted(self._entries.values(), key=lambda t: (KIND_ORDER[t.kind], order[(t.kind, t.name)]))
