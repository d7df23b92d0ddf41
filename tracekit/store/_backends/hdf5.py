"""Reading a finished golden (HDF5). Lazy: opening reads the root attributes and
the metadata; a value's chunks are read only when the value is asked for."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Tuple

import h5py
import numpy as np

from ...errors import CorruptTrace, NewerFormat, NotATrace
from ...keys import INITIAL_STEP, KIND_ORDER, make_key
from .. import _metadata, values
from .._codec import chunk_offsets
from .._format import (ATTR_CRC, ATTR_CREATED, ATTR_DELTA_BASE, ATTR_FORM, ATTR_FORMAT, ATTR_INFO, ATTR_LOGICAL,
                       ATTR_LOGICAL_SHAPE, ATTR_PRODUCER, ATTR_RECOVERED, ATTR_STEPS, ATTR_STRUCTURE, FILTER_SHUFFLE,
                       FILTER_ZSTD, FORMAT_VERSION, INITIAL_GROUP, META_DATASET, STEPS_GROUP, escape_name,
                       step_path, unescape_name)
from .._h5compat import phil
from .._wire import LeafDescriptor
from ..catalog import TensorInfo
from .base import Backend, LeafRef

MAX_LEAVES = 1 << 20


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _step_of_path(path: str) -> int:
    """Step index from a delta_base path such as /steps/00000003/var/x."""
    parts = path.strip("/").split("/")
    if parts[0] == INITIAL_GROUP:
        return INITIAL_STEP
    if parts[0] == STEPS_GROUP and len(parts) > 1:
        return int(parts[1])
    raise ValueError("delta base %r is not a step path" % (path,))


class HDF5Backend(Backend):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        try:
            self._file = h5py.File(path, "r")
        except OSError as exc:
            raise CorruptTrace("%s: cannot be opened as HDF5 (%s); the file is truncated or damaged"
                               % (path, exc)) from None
        try:
            self._read_root()
        except Exception:
            self._file.close()
            raise

    def _read_root(self) -> None:
        try:
            attrs = self._file.attrs
            names = set(attrs.keys())
        except Exception as exc:
            raise CorruptTrace("%s: root attributes unreadable (%s)" % (self.path, exc)) from None
        if ATTR_FORMAT not in names:
            raise NotATrace("%s is an HDF5 file but not a tracekit golden (no %r attribute)"
                            % (self.path, ATTR_FORMAT))
        header = self.header
        try:
            version = int(attrs[ATTR_FORMAT])
            header.producer = _text(attrs.get(ATTR_PRODUCER, "?"))
            header.created = _text(attrs.get(ATTR_CREATED, "?"))
            header.nsteps = int(attrs[ATTR_STEPS])
            header.recovered = bool(attrs.get(ATTR_RECOVERED, False))
        except Exception as exc:
            raise CorruptTrace("%s: bad root attributes (%s)" % (self.path, exc)) from None
        if version > FORMAT_VERSION:
            raise NewerFormat("%s is in golden format %d (written by %s); this tracekit reads format %d: "
                              "upgrade tracekit" % (self.path, version, header.producer, FORMAT_VERSION))
        if version < 1:
            raise CorruptTrace("%s: bad format version %d" % (self.path, version))
        header.format_version = version
        try:
            raw = self._file[META_DATASET]
            if raw.size > (256 << 20):
                raise ValueError("metadata of %d bytes" % raw.size)
            meta = _metadata.unpack(np.asarray(raw[()], dtype=np.uint8).tobytes())
            if not isinstance(meta, dict):
                raise ValueError("metadata is not a map")
            header.catalog = [TensorInfo.from_dict(d) for d in meta.pop("catalog", [])]
            header.meta = meta
            steps = self._file.get(STEPS_GROUP)
            count = 0 if steps is None else len(steps)
            header.has_initial = INITIAL_GROUP in self._file
        except Exception as exc:
            raise CorruptTrace("%s: metadata unreadable (%s); the file is damaged" % (self.path, exc)) from None
        if count != header.nsteps:
            raise CorruptTrace("%s: says %d steps but holds %d; the file is damaged"
                               % (self.path, header.nsteps, count))

    def _group(self, step: int) -> h5py.Group:
        return self._file[step_path(step)]

    def _info(self, step: int) -> Dict[str, Any]:
        raw = self._group(step).attrs.get(ATTR_INFO)
        return {} if raw is None else _metadata.unpack(raw.tobytes())

    def _keys(self, step: int) -> List[Tuple[str, str]]:
        group = self._group(step)
        out = []
        for kind in group.keys():
            if kind not in KIND_ORDER:
                raise ValueError("unknown kind group %r" % kind)
            out.extend((kind, unescape_name(link)) for link in group[kind].keys())
        return out

    def entry(self, step: int, kind: str, name: str) -> Tuple[Optional[list], List[LeafRef]]:
        group = self._group(step)
        obj = group.get("%s/%s" % (kind, escape_name(name)))
        if obj is None:
            raise KeyError(make_key(kind, name))
        if isinstance(obj, h5py.Dataset):
            return None, [self._ref(obj)]
        spec = _metadata.unpack(obj.attrs[ATTR_STRUCTURE].tobytes())
        if len(obj) > MAX_LEAVES:
            raise ValueError("structure with %d leaves" % len(obj))
        return spec, [self._ref(obj[str(i)]) for i in range(len(obj))]

    def _ref(self, ds: h5py.Dataset) -> LeafRef:
        """A finished golden keeps a leaf's descriptor as HDF5 facts and attributes."""
        attrs = ds.attrs
        logical = attrs.get(ATTR_LOGICAL)
        form = attrs.get(ATTR_FORM)
        lshape = attrs.get(ATTR_LOGICAL_SHAPE)
        base = attrs.get(ATTR_DELTA_BASE)  # present on XOR-delta encoded snapshots only
        shape = tuple(int(d) for d in ds.shape)
        chunked = ds.chunks is not None
        dtype = np.dtype(ds.dtype)
        desc = LeafDescriptor(
            layout=values.CHUNKED if chunked else values.PLAIN, shape=shape, dtype=dtype.str,
            logical=None if logical is None else _text(logical), form=values.ARRAY if form is None else _text(form),
            crc=int(attrs[ATTR_CRC]), logical_shape=None if lshape is None else tuple(int(d) for d in lshape),
            chunk=tuple(ds.chunks) if chunked else None,
            delta_base=None if base is None else _step_of_path(_text(base)),
            nbytes=None if chunked else dtype.itemsize * int(np.prod(shape, dtype=np.int64)))
        return LeafRef(desc, ds)

    def chunks(self, ref: LeafRef) -> Iterator[Tuple[Tuple[int, ...], int, bytes]]:
        dsid = ref.loc.id
        for offset in chunk_offsets(ref.desc.shape, ref.desc.chunk):
            with phil:  # h5py does not take its own lock for direct chunk reads
                mask, payload = dsid.read_direct_chunk(tuple(offset))
            yield tuple(offset), mask, payload

    def fallback(self, ref: LeafRef) -> Optional[np.ndarray]:
        # A golden re-packed by other HDF5 tools may use other filters: let HDF5 decode those.
        plist = ref.loc.id.get_create_plist()
        filters = tuple(plist.get_filter(i)[0] for i in range(plist.get_nfilters()))
        if filters == (FILTER_SHUFFLE, FILTER_ZSTD):
            return None
        out = np.empty(ref.desc.shape, dtype=ref.desc.numpy_dtype)
        ref.loc.read_direct(out)
        return out

    def plain(self, ref: LeafRef) -> np.ndarray:
        out = np.empty(ref.desc.shape, dtype=ref.desc.numpy_dtype)
        if out.size:
            ref.loc.read_direct(out)
        return out

    def close(self) -> None:
        self._file.close()
