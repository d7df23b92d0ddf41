"""The records a golden's journal holds, and the only code that knows their wire form.

While a trace is written, every value, step commit and metadata update is appended
to the journal as a msgpack map with short keys (docs/FORMAT.md, "The journal").
The rest of the store works with the frozen records below; `to_wire()` gives the
map, `from_wire()` reads one back and raises ValueError when it does not fit the
schema (a foreign or hand-edited journal: the readers turn that into CorruptTrace).

    record   "t"     fields (wire key: attribute)
    open     open    format, producer, created, token, meta
    value    value   q: attempt, s: step, k: kind, n: name, st: structure, leaves
    step     step    q: attempt, s: step, info, n: count
    meta     meta    meta

A leaf descriptor (`leaves` items) says how one stored array is laid out:

    l: layout ("chunked" | "plain")   sh: stored shape    dt: stored numpy dtype
    lg: logical dtype or nil          f: form              crc: crc32 of the bytes
    ls: the caller's shape (strings only: the stored array is their blob)
    chunked: ch: chunk shape, lv: zstd level (nil: tuned default),
             e: "xor" + b: base step (a delta to an earlier snapshot),
             cs: chunks [[offset, filter mask, size, file address], ...]
    plain:   n: byte count of the raw bytes, inline in the record's payload
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from ._format import PARTIAL_SUFFIX, STORED_ORDER
from .structures import leaf_count
from .values import ARRAY, CHUNKED, NUMPY_SCALAR, PLAIN, PYTHON

XOR = "xor"  # the one delta encoding

Shape = Tuple[int, ...]


def _shape(value: Any, what: str) -> Shape:
    if not isinstance(value, (list, tuple)) or not all(isinstance(d, int) and d >= 0 for d in value):
        raise ValueError("%s %r is not a list of sizes" % (what, value))
    return tuple(int(d) for d in value)


def _int(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError("%s %r is not an integer" % (what, value))
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError("%s %r is not text" % (what, value))
    return value


def _map(value: Any, what: str) -> Dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("%s is not a map" % what)
    return dict(value)


@dataclass(frozen=True)
class Chunk:
    """One compressed chunk of a chunked leaf, where the unfinished golden holds it."""

    offset: Shape
    mask: int  # HDF5 filter mask: bit set = filter skipped
    size: int
    address: int

    def to_wire(self) -> list:
        return [list(self.offset), self.mask, self.size, self.address]

    @classmethod
    def from_wire(cls, wire: Any) -> "Chunk":
        if not isinstance(wire, (list, tuple)) or len(wire) != 4:
            raise ValueError("chunk entry %r is not [offset, mask, size, address]" % (wire,))
        offset, mask, size, address = wire
        return cls(_shape(offset, "chunk offset"), _int(mask, "chunk mask"), _int(size, "chunk size"),
                   _int(address, "chunk address"))


@dataclass(frozen=True)
class LeafDescriptor:
    """How one stored array is laid out and how to give the caller's value back."""

    layout: str  # CHUNKED or PLAIN
    shape: Shape  # of the stored array
    dtype: str  # numpy dtype string of the stored array
    logical: Optional[str]  # the caller's dtype when it differs (values.py)
    form: str  # array, numpy scalar or Python scalar
    crc: int
    logical_shape: Optional[Shape] = None  # strings: the caller's shape (the stored array is a blob)
    chunk: Optional[Shape] = None  # chunked only
    level: Optional[int] = None  # zstd level; None: the tuned default
    delta_base: Optional[int] = None  # step of the snapshot this one is XORed against
    nbytes: Optional[int] = None  # plain only: size of the raw bytes
    chunks: Tuple[Chunk, ...] = ()  # chunked, once written: where each chunk lies

    def __post_init__(self) -> None:
        if self.layout == CHUNKED:
            if self.chunk is None or len(self.chunk) != len(self.shape) or not all(self.chunk):
                raise ValueError("chunked leaf of shape %s with chunk shape %s" % (self.shape, self.chunk))
        elif self.layout == PLAIN:
            if self.nbytes is None:
                raise ValueError("plain leaf without a byte count")
        else:
            raise ValueError("unknown leaf layout %r" % (self.layout,))
        if self.form not in (ARRAY, NUMPY_SCALAR, PYTHON):
            raise ValueError("unknown leaf form %r" % (self.form,))

    @property
    def caller_shape(self) -> Shape:
        return self.shape if self.logical_shape is None else self.logical_shape

    @property
    def numpy_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    @property
    def raw_bytes(self) -> int:
        count = 1
        for d in self.shape:
            count *= d
        return self.numpy_dtype.itemsize * count

    @property
    def stored_bytes(self) -> int:
        return sum(c.size for c in self.chunks) if self.layout == CHUNKED else self.raw_bytes

    def to_wire(self) -> Dict[str, Any]:
        wire: Dict[str, Any] = {"l": self.layout, "sh": list(self.shape), "dt": self.dtype, "lg": self.logical,
                                "f": self.form, "crc": self.crc}
        if self.logical_shape is not None:
            wire["ls"] = list(self.logical_shape)
        if self.layout == CHUNKED:
            wire["ch"] = list(self.chunk or ())
            if self.level is not None:
                wire["lv"] = self.level
            if self.delta_base is not None:
                wire["e"], wire["b"] = XOR, self.delta_base
            if self.chunks:
                wire["cs"] = [c.to_wire() for c in self.chunks]
        else:
            wire["n"] = self.nbytes
        return wire

    @classmethod
    def from_wire(cls, wire: Any) -> "LeafDescriptor":
        if not isinstance(wire, dict):
            raise ValueError("leaf descriptor is not a map")
        try:
            np.dtype(_text(wire.get("dt"), "leaf dtype"))
        except TypeError:
            raise ValueError("leaf dtype %r is not a numpy dtype" % (wire.get("dt"),)) from None
        if wire.get("e") not in (None, XOR):
            raise ValueError("unknown delta encoding %r" % (wire["e"],))
        logical, ls, ch, lv, b, n = (wire.get(k) for k in ("lg", "ls", "ch", "lv", "b", "n"))
        return cls(
            layout=_text(wire.get("l"), "leaf layout"),
            shape=_shape(wire.get("sh"), "leaf shape"),
            dtype=wire["dt"],
            logical=None if logical is None else _text(logical, "logical dtype"),
            form=_text(wire.get("f", ARRAY), "leaf form"),
            crc=_int(wire.get("crc"), "leaf checksum"),
            logical_shape=None if ls is None else _shape(ls, "logical shape"),
            chunk=None if ch is None else _shape(ch, "chunk shape"),
            level=None if lv is None else _int(lv, "zstd level"),
            delta_base=None if b is None or wire.get("e") is None else _int(b, "delta base step"),
            nbytes=None if n is None else _int(n, "byte count"),
            chunks=tuple(Chunk.from_wire(c) for c in wire.get("cs") or ()),
        )


@dataclass(frozen=True)
class OpenRecord:
    """The journal's first record: what the finished golden's root attributes will say."""

    format: int
    producer: str
    created: str
    token: str  # names the recording; the golden's user block holds it too
    meta: Dict[str, Any]
    # Where the chunks go, as a suffix of the golden's path: "" (the golden's path itself, as
    # recordings before PARTIAL_SUFFIX did) or PARTIAL_SUFFIX, renamed to the path when finished.
    data: str = ""

    TYPE = "open"

    def to_wire(self) -> Dict[str, Any]:
        wire = {"t": self.TYPE, "format": self.format, "producer": self.producer, "created": self.created,
                "token": self.token, "meta": self.meta}
        if self.data:
            wire["data"] = self.data
        return wire

    @classmethod
    def from_wire(cls, wire: Dict[str, Any]) -> "OpenRecord":
        data = wire.get("data", "")
        if data not in ("", PARTIAL_SUFFIX):  # a suffix, never a path: a journal names no other file
            raise ValueError("unknown data file %r" % (data,))
        return cls(_int(wire.get("format"), "format version"), str(wire.get("producer", "?")),
                   str(wire.get("created", "?")), str(wire.get("token", "")), _map(wire.get("meta"), "metadata"),
                   data)


@dataclass(frozen=True)
class ValueRecord:
    """One named value of a step attempt; its payload holds the plain leaves' bytes."""

    attempt: int  # a step's values count once a StepRecord commits this attempt
    step: int
    kind: str
    name: str
    structure: Optional[list]  # structures.flatten's spec; None for a bare leaf
    leaves: Tuple[LeafDescriptor, ...] = ()

    TYPE = "value"

    def __post_init__(self) -> None:
        if self.kind not in STORED_ORDER:
            raise ValueError("unknown kind %r" % (self.kind,))

    def to_wire(self) -> Dict[str, Any]:
        return {"t": self.TYPE, "q": self.attempt, "s": self.step, "k": self.kind, "n": self.name,
                "st": self.structure, "leaves": [d.to_wire() for d in self.leaves]}

    @classmethod
    def from_wire(cls, wire: Dict[str, Any]) -> "ValueRecord":
        kind = _text(wire.get("k"), "kind")
        if kind not in STORED_ORDER:
            raise ValueError("unknown kind %r" % (kind,))
        structure = wire.get("st")
        if structure is not None and not isinstance(structure, list):
            raise ValueError("structure %r is not a list" % (structure,))
        leaves = wire.get("leaves")
        if not isinstance(leaves, list):
            raise ValueError("value record without a list of leaves")
        # A structure may hold no leaf at all (what sess.run(train_op) returns: None), a bare value one.
        expected = leaf_count(structure)
        if len(leaves) != expected:
            raise ValueError("value record of %d leaves whose structure holds %d" % (len(leaves), expected))
        return cls(_int(wire.get("q"), "attempt"), _int(wire.get("s"), "step"), kind, _text(wire.get("n"), "name"), structure, tuple(LeafDescriptor.from_wire(d) for d in leaves))


@dataclass(frozen=True)
class StepRecord:
    """Commits attempt `attempt` as step `step` (-1: the initial state) with `count` values."""

    attempt: int
    step: int
    info: Dict[str, Any]
    count: Optional[int] = None  # None in journals that did not say

    TYPE = "step"

    def to_wire(self) -> Dict[str, Any]:
        wire = {"t": self.TYPE, "q": self.attempt, "s": self.step, "info": self.info}
        if self.count is not None:
            wire["n"] = self.count
        return wire

    @classmethod
    def from_wire(cls, wire: Dict[str, Any]) -> "StepRecord":
        count = wire.get("n")
        return cls(_int(wire.get("q"), "attempt"), _int(wire.get("s"), "step"), _map(wire.get("info"), "step info"),
                   None if count is None else _int(count, "value count"))


@dataclass(frozen=True)
class MetaRecord:
    """Metadata merged into what the records before it said."""

    meta: Dict[str, Any]

    TYPE = "meta"

    def to_wire(self) -> Dict[str, Any]:
        return {"t": self.TYPE, "meta": self.meta}

    @classmethod
    def from_wire(cls, wire: Dict[str, Any]) -> "MetaRecord":
        return cls(_map(wire.get("meta"), "metadata"))


Record = Union[OpenRecord, ValueRecord, StepRecord, MetaRecord]
_TYPES = {cls.TYPE: cls for cls in (OpenRecord, ValueRecord, StepRecord, MetaRecord)}


def record_from_wire(wire: Any) -> Optional[Record]:
    """The record a decoded journal header holds; None for a type this version does not know
    (a newer writer's addition is skipped, not fatal)."""
    if not isinstance(wire, dict) or "t" not in wire:
        raise ValueError("record without a type")
    cls = _TYPES.get(wire["t"])
    return None if cls is None else cls.from_wire(wire)


