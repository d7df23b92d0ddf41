"""Turning leaves into what the golden stores: leaf descriptors, compressed chunks, and
the choice of XOR-delta bases (a variable's snapshot against its previous one)."""

from __future__ import annotations

import concurrent.futures
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..keys import make_key
from . import _codec, _metadata, digest as digests, values
from ._format import DELTA_KINDS, KEYFRAME_INTERVAL
from ._golden import LeafData
from ._wire import LeafDescriptor

# Per leaf, the step of the snapshot to XOR against and its array; None: stored whole.
Bases = Optional[List[Tuple[int, np.ndarray]]]


def encode_leaves(leaves: List[values.Leaf], bases: Bases, level: Optional[int]) -> List[LeafData]:
    """Per leaf: (descriptor, data): chunk payloads for the golden, or the raw bytes of a
    small (plain) leaf, which the journal keeps too. Runs on a pool thread."""
    out: List[LeafData] = []
    for i, leaf in enumerate(leaves):
        facts = dict(layout=leaf.layout, shape=tuple(leaf.array.shape), dtype=leaf.dtype, logical=leaf.logical,
                     form=leaf.form, crc=values.checksum(leaf.array),
                     # strings: the blob's shape is not the array's
                     logical_shape=leaf.shape if leaf.shape != leaf.array.shape else None)
        if leaf.layout == values.CHUNKED:
            chunk = _codec.chunk_shape(leaf.array.shape, leaf.array.dtype.itemsize)
            base = bases[i] if bases else None
            desc = LeafDescriptor(chunk=tuple(chunk), level=level, delta_base=None if base is None else base[0],
                                  **facts)
            out.append((desc, _codec.encode_array(leaf.array, chunk, level, None if base is None else base[1])))
        else:
            raw = leaf.array.tobytes()
            out.append((LeafDescriptor(nbytes=len(raw), **facts), raw))
    return out


class DeltaBases:
    """Which earlier snapshot each variable and slot is XORed against. A snapshot is a base
    only once its step is committed, and every KEYFRAME_INTERVAL-th one is stored whole, so
    reading one snapshot decodes at most that many."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._step: Optional[int] = None
        self._last: Dict[str, Tuple[int, List[np.ndarray], int]] = {}  # key -> (step, arrays, chain length)
        self._pending: Dict[str, Tuple[int, List[np.ndarray], int]] = {}  # this step's snapshots

    def begin_step(self, step: Optional[int]) -> None:
        """A step opens (or, with None, the open one is dropped): forget its snapshots."""
        self._step = step
        self._pending = {}

    def commit(self) -> None:
        self._last.update(self._pending)

    def choose(self, kind: str, key: str, leaves: List[values.Leaf]) -> Bases:
        """Per leaf (base step, base array) to XOR against, or None; remembers this snapshot."""
        if not self.enabled or kind not in DELTA_KINDS or self._step is None:
            return None
        if not all(leaf.layout == values.CHUNKED and leaf.array.dtype.itemsize in (1, 2, 4, 8)
                   for leaf in leaves):
            return None
        arrays = [leaf.array for leaf in leaves]
        last = self._last.get(key)
        usable = (last is not None and last[2] + 1 < KEYFRAME_INTERVAL and len(last[1]) == len(arrays)
                  and all(a.shape == b.shape and a.dtype == b.dtype for a, b in zip(arrays, last[1])))
        self._pending[key] = (self._step, arrays, last[2] + 1 if usable else 0)
        if last is None or not usable:
            return None
        return [(last[0], base) for base in last[1]]


# A digest of the open step: kind, name, shape, dtype, and the digest (being) made.
PendingDigest = Tuple[str, str, Tuple[int, ...], str, "concurrent.futures.Future[digests.Digest]"]


def encode_digests(pending: "list[PendingDigest]", level: Optional[int], where: str) -> list:
    """A step's digests as one uint8 leaf, encoded. Runs on a pool thread after the digests' own
    tasks were started (the pool runs tasks in order), so waiting for them cannot deadlock."""
    blob = _metadata.pack(digests.pack([(make_key(kind, name), future.result())
                                        for kind, name, _, _, future in pending]))
    leaf = values.make_leaf(np.frombuffer(blob, dtype=np.uint8), where)
    return encode_leaves([leaf], None, level)
