"""What a trace reader needs from a file, and the decoding both file kinds share.

A backend (finished HDF5 golden, or an unfinished journal) lists steps and the
values in them and hands out leaf references; decoding a leaf (chunks, XOR-delta,
checksum) is the same for both and lives here. Every failure to read becomes a
CorruptTrace naming the file, the step and the tensor.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ..errors import CorruptTrace, TracekitError, UnsupportedValue
from . import codec, values
from .catalog import TensorInfo
from ..keys import INITIAL_STEP, KIND_ORDER, make_key, step_label


class LeafRef:
    """Where one stored leaf is and how to decode it; `loc` is the backend's own locator."""

    __slots__ = ("layout", "shape", "lshape", "dtype", "logical", "form", "crc", "chunk", "base", "loc")

    def __init__(self, layout: str, shape: Tuple[int, ...], lshape: Tuple[int, ...], dtype: np.dtype,
                 logical: Optional[str], form: str, crc: int, chunk: Optional[Tuple[int, ...]],
                 base: Optional[int], loc: Any) -> None:
        self.layout = layout
        self.shape = shape  # of the stored array
        self.lshape = lshape  # of the caller's value (differs for strings)
        self.dtype = dtype
        self.logical = logical
        self.form = form
        self.crc = crc
        self.chunk = chunk
        self.base = base  # step index of the XOR-delta base snapshot, or None
        self.loc = loc


def where(path: str, step: int, key: str) -> str:
    return "%s: %s, %s" % (path, step_label(step), key)


class Backend:
    """Base of the two file kinds. Subclasses fill the attributes and the abstract methods."""

    path = ""
    format_version = 0
    producer = ""
    created = ""
    complete = True
    recovered = False
    problem: Optional[str] = None  # why an unfinished trace is unfinished
    meta: Dict[str, Any] = {}
    catalog: List[TensorInfo] = []
    nsteps = 0
    has_initial = False

    def __init__(self) -> None:
        self._cache: Dict[Tuple[str, str, int], Tuple[int, Any]] = {}  # last decoded leaf
        self._order: Optional[Dict[Tuple[str, str], int]] = None

    # -- to implement ------------------------------------------------------------------------
    def _info(self, step: int) -> Dict[str, Any]:
        raise NotImplementedError

    def _keys(self, step: int) -> List[Tuple[str, str]]:
        """(kind, name) of the step's values, kinds in data-flow order, names in recording order."""
        raise NotImplementedError

    def entry(self, step: int, kind: str, name: str) -> Tuple[Optional[list], List[LeafRef]]:
        """(structure spec or None, leaf references) of a value the step holds."""
        raise NotImplementedError

    def chunks(self, ref: LeafRef) -> Iterator[Tuple[Tuple[int, ...], int, bytes]]:
        raise NotImplementedError

    def plain(self, ref: LeafRef) -> np.ndarray:
        raise NotImplementedError

    def fallback(self, ref: LeafRef) -> Optional[np.ndarray]:
        """A whole chunked leaf read another way (re-packed files), or None to decode chunks."""
        return None

    def close(self) -> None:
        pass

    # -- shared --------------------------------------------------------------------------------
    def _guard(self, label: str, fn: Any, *args: Any) -> Any:
        """Run fn; any failure but our own errors means the file is damaged. (h5py reports
        damaged metadata as KeyError, OSError, RuntimeError, ... depending on where.)"""
        try:
            return fn(*args)
        except TracekitError:
            raise
        except Exception as exc:
            raise CorruptTrace("%s: cannot be read (%s: %s); the file is damaged: restore it or "
                               "record it again" % (label, type(exc).__name__, exc)) from None

    def info(self, step: int) -> Dict[str, Any]:
        return self._guard(where(self.path, step, "step info"), self._info, step)

    def keys(self, step: int) -> List[Tuple[str, str]]:
        """The step's (kind, name) pairs: kinds in data-flow order, then catalog (recording) order."""
        label = where(self.path, step, "list of tensors")
        found = self._guard(label, self._keys, step)
        unknown = sorted({kind for kind, _ in found if kind not in KIND_ORDER})
        if unknown:
            raise CorruptTrace("%s: unknown kinds %s; the file is damaged or not written by tracekit"
                               % (label, ", ".join(unknown)))
        if self._order is None:
            self._order = {(t.kind, t.name): i for i, t in enumerate(self.catalog)}
        last = len(self._order)
        return sorted(found, key=lambda kn: (KIND_ORDER[kn[0]], self._order.get(kn, last), kn[1]))

    def value(self, step: int, kind: str, name: str) -> Any:
        """The value of a key that `keys(step)` listed."""
        label = where(self.path, step, make_key(kind, name))
        spec, refs = self._guard(label, self.entry, step, kind, name)
        out = [self._restore(label, self.storage(step, kind, name, i, ref), ref) for i, ref in enumerate(refs)]
        return self._guard(label, values.unflatten, spec, out)

    def _restore(self, label: str, storage: np.ndarray, ref: LeafRef) -> Any:
        try:
            return self._guard(label, values.restore_leaf, storage, ref.lshape, ref.logical, ref.form)
        except UnsupportedValue as exc:  # a dtype this environment lacks (bfloat16 without ml_dtypes)
            raise UnsupportedValue("%s: %s" % (label, exc)) from None

    def storage(self, step: int, kind: str, name: str, leaf: int, ref: LeafRef) -> np.ndarray:
        """The verified storage array of one leaf."""
        cached = self._cache.get((kind, name, leaf))
        if cached is not None and cached[0] == step:
            return cached[1]
        label = where(self.path, step, make_key(kind, name))
        data = self._guard(label, self._decode, step, kind, name, leaf, ref)
        crc = values.checksum(data)
        if crc != ref.crc:
            raise CorruptTrace("%s: checksum mismatch (stored %08x, data %08x); the file is damaged: "
                               "restore it or record it again" % (label, ref.crc, crc))
        if ref.layout == values.CHUNKED:
            self._cache[(kind, name, leaf)] = (step, data)
        return data

    def _decode(self, step: int, kind: str, name: str, leaf: int, ref: LeafRef) -> Any:
        if ref.layout == values.PLAIN:
            return self.plain(ref)
        base = None
        if ref.base is not None:
            if ref.base >= step or ref.base < INITIAL_STEP:
                raise ValueError("delta base step %d is not before step %d" % (ref.base, step))
            _, base_refs = self.entry(ref.base, kind, name)
            base = self.storage(ref.base, kind, name, leaf, base_refs[leaf])
            if base.shape != ref.shape or base.dtype != ref.dtype:
                raise ValueError("delta base at step %d has another shape or dtype" % ref.base)
        whole = self.fallback(ref)
        if whole is not None:
            if base is not None:
                whole = np.bitwise_xor(codec.bits(whole), codec.bits(base)).view(ref.dtype)
            return whole
        out = np.empty(ref.shape, dtype=ref.dtype)
        seen = 0
        for offset, mask, payload in self.chunks(ref):
            region = codec.decode_chunk(payload, mask, ref.chunk, ref.dtype)
            codec.place(out, offset, region, base)
            seen += 1
        expected = 1
        for s, c in zip(ref.shape, ref.chunk):
            expected *= -(-s // c)
        if seen != expected:
            raise ValueError("%d of %d chunks present" % (seen, expected))
        return out
