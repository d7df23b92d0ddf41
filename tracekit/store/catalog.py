"""The catalog: one entry per recorded tensor (kind, name), summed over the steps."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..keys import INITIAL_STEP, KIND_ORDER, make_key
from . import values
from ._format import DIGESTS_KIND
from .drawn import drawn_bytes, dtype_of, is_drawn
from ._wire import ValueRecord


@dataclass
class TensorInfo:
    """What a trace holds of one tensor: shape and dtype (None/"structure" when they
    vary or the value is a structure), how many steps have it, and its sizes."""

    kind: str
    name: str
    shape: Optional[Tuple[int, ...]]
    dtype: str
    steps: int = 0
    initial: bool = False
    raw_bytes: int = 0
    stored_bytes: int = 0
    digests: int = 0  # steps that keep its digest instead (store/digest.py)
    drawn: int = 0  # steps that keep it as its generator's key and counter (store/drawn.py)

    @property
    def key(self) -> str:
        return make_key(self.kind, self.name)

    @property
    def ratio(self) -> float:
        return self.raw_bytes / self.stored_bytes if self.stored_bytes else 1.0

    def to_dict(self) -> Dict[str, Any]:
        out = dataclasses.asdict(self)
        out["shape"] = None if self.shape is None else list(self.shape)
        return out

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "TensorInfo":
        shape = d.get("shape")
        return cls(str(d["kind"]), str(d["name"]), None if shape is None else tuple(int(x) for x in shape),
                   str(d.get("dtype", "?")), int(d.get("steps", 0)), bool(d.get("initial", False)),
                   int(d.get("raw_bytes", 0)), int(d.get("stored_bytes", 0)), int(d.get("digests", 0)),
                   int(d.get("drawn", 0)))

    def __repr__(self) -> str:
        return "TensorInfo(%s, shape=%s, dtype=%s, steps=%d)" % (self.key, self.shape, self.dtype, self.steps)


def leaf_dtype_name(dtype: str, logical: Optional[str]) -> str:
    if logical == values.LOGICAL_BYTES:
        return "bytes"
    if logical == values.LOGICAL_STR:
        return "str"
    if is_drawn(logical):
        return dtype_of(str(logical))
    if logical is not None:
        return logical
    return np.dtype(dtype).name


class CatalogBuilder:
    """Collects TensorInfo entries in first-seen order, data-flow order by kind."""

    def __init__(self) -> None:
        self._entries: Dict[Tuple[str, str], TensorInfo] = {}

    def add(self, step: int, record: ValueRecord) -> None:
        """Count one value committed at `step` (a step's digests are no tensor: not counted)."""
        if record.kind == DIGESTS_KIND:
            return
        leaves = record.leaves
        if record.structure is None and len(leaves) == 1:
            shape: Optional[Tuple[int, ...]] = leaves[0].caller_shape
            dtype = leaf_dtype_name(leaves[0].dtype, leaves[0].logical)
        else:
            shape, dtype = None, "structure"
        kind, name = record.kind, record.name
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
            drawn = is_drawn(desc.logical)  # raw: the values' bytes, which 24 stand for
            info.drawn += drawn
            info.raw_bytes += drawn_bytes(desc.caller_shape, desc.logical) if drawn else desc.raw_bytes
            info.stored_bytes += desc.stored_bytes

    def add_digest(self, kind: str, name: str, shape: Tuple[int, ...], dtype: str) -> None:
        """Count one digest committed at a step (the tensor's raw bytes are not stored)."""
        info = self._entries.get((kind, name))
        if info is None:
            info = self._entries[(kind, name)] = TensorInfo(kind, name, shape, dtype)
        elif info.shape != shape or info.dtype != dtype:
            info.shape = None
            if info.dtype != dtype:
                info.dtype = "varies"
        info.digests += 1

    def entries(self) -> List[TensorInfo]:
        order = {key: i for i, key in enumerate(self._entries)}
        return sorted(self._entries.values(), key=lambda t: (KIND_ORDER[t.kind], order[(t.kind, t.name)]))
