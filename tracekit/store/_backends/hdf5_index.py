"""What a step's HDF5 group holds, read so that damage is an error: its attributes (a missing
one told from an unreadable one), its msgpack blobs checked against their crc32, and its index
of values, parsed entry by entry within what the file's size allows; and how a failure of the
HDF5 library is told from tracekit's own checks (the walk that screens a golden)."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

import h5py
import msgpack

from .. import _metadata, values
from .._format import BLOB_CRC_SUFFIX, INITIAL_GROUP, STEPS_GROUP, STORED_ORDER, blob_crc
from .._wire import LeafDescriptor
from ...keys import INITIAL_STEP
from .base import short

# A step's index: (kind, name) -> (structure spec, the leaves' wire maps, parsed when read)
Index = Dict[Tuple[str, str], Tuple[Optional[list], List[Dict[str, Any]]]]


def text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def step_of_path(path: str) -> int:
    """Step index from a delta_base path such as /steps/00000003/var/x."""
    parts = path.strip("/").split("/")
    if parts[0] == INITIAL_GROUP:
        return INITIAL_STEP
    if parts[0] == STEPS_GROUP and len(parts) > 1:
        return int(parts[1])
    raise ValueError("delta base %r is not a step path" % (path,))


class BadIndex(ValueError):
    """A step index that decodes but says what no golden says."""


class HDF5Failure(ValueError):
    """HDF5 failed to read what the file holds (reworded from h5py's error): damage HDF5 found."""


def attr(attrs: h5py.AttributeManager, name: str, default: Any = None) -> Any:
    """`attrs.get`, but an attribute HDF5 cannot read is an error, not absent: h5py raises
    KeyError both for a missing attribute and for one in an object header chunk that fails
    its checksum, so `get` would read damage as "not there"."""
    try:
        return attrs[name]
    except KeyError:
        pass
    try:
        present = name in attrs
    except Exception as exc:  # HDF5 could not read the object header that would hold it
        raise HDF5Failure("attribute %r unreadable (%s)" % (name, short(exc, typed=False))) from None
    if present:
        raise HDF5Failure("attribute %r exists but cannot be read" % name)
    return default


def blob(attrs: h5py.AttributeManager, name: str) -> Optional[bytes]:
    """A msgpack blob attribute's bytes, checked against the crc32 beside it when the file has one."""
    raw = attr(attrs, name)
    if raw is None:
        return None
    data = raw.tobytes()
    crc = attr(attrs, name + BLOB_CRC_SUFFIX)
    if crc is not None and int(crc) != blob_crc(data):
        raise ValueError("the %r attribute does not match its checksum" % name)
    return data


def plain_leaf(wire: Dict[str, Any]) -> LeafDescriptor:
    """A plain leaf's descriptor from the step index, whose bytes are in it under "v"."""
    desc = LeafDescriptor.from_wire(wire)
    data = wire.get("v")
    if not isinstance(data, bytes) or len(data) != desc.nbytes:
        raise ValueError("the step index holds %s bytes of a %d-byte leaf" % (
            len(data) if isinstance(data, bytes) else "no", desc.nbytes or 0))
    return desc


def chunked_leaf(wire: Dict[str, Any]) -> LeafDescriptor:
    """A chunked leaf's descriptor from the step index, as its dataset's attributes hold it."""
    desc = LeafDescriptor.from_wire(wire)
    if desc.layout != values.CHUNKED or not desc.chunk:
        raise ValueError("the step index describes a chunked leaf without its chunk shape")
    return replace(desc, level=None)


def from_hdf5(exc: Optional[BaseException], depth: int = 0) -> bool:
    """Did HDF5 fail (h5py raised it, or what it was raised for, or attr reworded its failure),
    rather than tracekit's own checks of what it read?"""
    if exc is None or depth > 8:
        return False
    if isinstance(exc, HDF5Failure):
        return True
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    name = tb.tb_frame.f_code.co_filename if tb is not None else ""
    if name.startswith("h5py") or (os.sep + "h5py" + os.sep) in name:
        return True
    return from_hdf5(exc.__cause__ or exc.__context__, depth + 1)


class Quietly:
    """Calls that may fail, the HDF5 library's failures noted (the walk looks for damage HDF5
    finds, and for crashes; tracekit's own checks are the reader's to report)."""

    def __init__(self) -> None:
        self.damage: List[str] = []

    def __call__(self, read: Any, *args: Any, damage: bool = True) -> Any:
        """read(*args), or None if it raises; `damage`: an HDF5 failure there is damage (a filter
        HDF5 lacks, as in fallback(), is not: the reader reports it for that value alone)."""
        try:
            return read(*args)
        except Exception as exc:  # noqa: BLE001
            if damage and from_hdf5(exc) and len(self.damage) < 20:
                self.damage.append(short(exc))
            return None


def parse_index(raw: bytes, max_values: int, size: int) -> Index:
    """A step's index, read entry by entry: the leaves it declares are counted against what
    the file can hold before they are decoded."""
    index: Index = {}
    budget = max_values
    try:
        stream = _metadata.unpacker(raw)
        for _ in range(stream.read_array_header()):
            if stream.read_array_header() != 4:
                raise BadIndex("a step index entry is not [kind, name, structure, leaves]")
            kind, name, spec = stream.unpack(), stream.unpack(), stream.unpack()
            count = stream.read_array_header()
            budget -= count
            if budget < 0:
                raise BadIndex("the step index lists more values than a file of %d bytes can hold" % size)
            leaves = [stream.unpack() for _ in range(count)]
            if kind not in STORED_ORDER or not isinstance(name, str) or not (spec is None and count == 1
                                                                          or isinstance(spec, list)):
                raise BadIndex(("step index entry for %r/%r is malformed" % (kind, name))[:300])
            if not all(isinstance(leaf, dict) for leaf in leaves):
                raise BadIndex("step index entry for %s/%s has a leaf that is not a map" % (kind, name))
            index[(kind, name)] = (spec, leaves)
        stream.unpack()  # must run out here
    except msgpack.OutOfData:
        return index
    except BadIndex:
        raise
    except Exception as exc:  # msgpack raises several unrelated types on bad input
        raise ValueError("the step index does not decode (%s)" % short(exc)) from None
    raise ValueError("the step index has data after its last entry")
