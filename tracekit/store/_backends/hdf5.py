"""Reading a finished golden (HDF5). Lazy: opening reads the root attributes and
the metadata; a value's chunks are read only when the value is asked for."""

from __future__ import annotations

import atexit
import collections
import os
import weakref
from typing import Any, Dict, Iterator, List, Optional, Tuple

import h5py
import numpy as np

from ...errors import CorruptTrace, NewerFormat, NotATrace
from ...keys import INITIAL_STEP, make_key
from .. import _metadata, values
from .._codec import chunk_offsets
from .._format import (ATTR_CRC, ATTR_CREATED, ATTR_DELTA_BASE, ATTR_FORM, ATTR_FORMAT,
                       ATTR_INDEX, ATTR_INFO, ATTR_LOGICAL, ATTR_LOGICAL_SHAPE, ATTR_PRODUCER, ATTR_RECOVERED,
                       ATTR_STEPS, ATTR_STRUCTURE, BLOCKS_GROUP, BLOCKS_VERSION, FILTER_SHUFFLE, FILTER_ZSTD,
                       FORMAT_VERSION, INITIAL_GROUP, META_DATASET, STEPS_GROUP, STORED_ORDER, blob_crc, block_path,
                       escape_name, step_path, unescape_name, value_path)
from .._h5compat import phil
from .._screen import screen
from .._wire import LeafDescriptor
from ..catalog import TensorInfo
from .base import FRAMES_CHECKED, Backend, LeafRef, short
from .hdf5_blocks import Blocks
from .hdf5_index import Index, Quietly, attr, blob, chunked_leaf, parse_index, plain_leaf, step_of_path, text

MAX_LEAVES = 1 << 20
# Every value a golden lists has a dataset of its own: 400-600 bytes of HDF5 each, measured.
# A step index or catalog listing more than one value per this many bytes of file is damaged
# or hostile, and refused before it is decoded into Python objects.
BYTES_PER_VALUE = 128
INDEXES_KEPT = 8  # steps whose index stays parsed: a step and the delta bases before it
# A catalog entry as the writer makes it takes this many bytes at least (its keys alone take 60): in
# format 2 a small tensor has no dataset, and its catalog entry is what bounds how many a file lists.
CATALOG_ENTRY_BYTES = 80
# A leaf's descriptor in a block's step index takes this many bytes at least (its layout, shape,
# dtype, form and checksum): an index declaring more leaves than its bytes can hold is refused.
LEAF_WIRE_BYTES = 32

# Files HDF5 reads through a Python file object (a golden at a URL): one still open when the
# interpreter tears down crashes it (h5py 3.14, measured), so they are closed at exit.
_through_python: "weakref.WeakSet[h5py.File]" = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    for opened in list(_through_python):
        opened.close()


def _keep(cache: "collections.OrderedDict[int, Any]", step: int, value: Any) -> None:
    """Remember a step's value, forgetting the oldest beyond INDEXES_KEPT (safe across threads)."""
    cache[step] = value
    while len(cache) > INDEXES_KEPT:
        try:
            cache.popitem(last=False)
        except KeyError:  # another thread emptied it meanwhile
            break


class _Dataset:
    """A chunked leaf's dataset, opened when its bytes are first read: a leaf served from the
    reader's cache (a delta base, most often) never opens it."""

    __slots__ = ("_backend", "_path", "_id")

    def __init__(self, backend: "HDF5Backend", path: str) -> None:
        self._backend = backend
        self._path = path
        self._id: Optional[h5py.h5d.DatasetID] = None

    @property
    def id(self) -> h5py.h5d.DatasetID:
        if self._id is None:
            self._id = self._backend.opened(self._path)
        return self._id


def walk(path: str) -> Tuple[str, ...]:
    """Make every HDF5 call that reading the golden at `path` makes; returns what HDF5 raised on
    the way (the screen's child, _screen.py). TracekitError if it does not open."""
    backend = HDF5Backend(path, screened=False)
    try:
        return backend.walk()
    finally:
        backend.close()


class HDF5Backend(Backend):
    def __init__(self, path: str, screened: bool = True, source: Any = None) -> None:
        """Open a golden; `screened`: walk it in a child first, the first time this process opens
        it (_screen.py), so that a crash of the HDF5 library on a damaged file is not this process's.
        `source`: a file object with `size` to read the golden at `path` through (a URL: remote.py,
        never screened: the walk would fetch every byte); it is closed with the backend."""
        if screened and source is None:
            screen(path, walk)
        super().__init__(path)
        self._source = source
        # The last few steps' index and group, shared by reader threads: OrderedDict's popitem
        # evicts in one call, where iterating a dict another thread grows would raise.
        self._indexes: "collections.OrderedDict[int, Optional[Index]]" = collections.OrderedDict()
        self._groups: "collections.OrderedDict[int, h5py.Group]" = collections.OrderedDict()
        self._blocks: Optional[Blocks] = None  # format 2
        try:
            self._size = os.path.getsize(path) if source is None else source.size
            self._max_values = max(4096, self._size // BYTES_PER_VALUE)  # in a step's index, or the catalog
            self._file = self._open()
        except OSError as exc:
            self._failed()
            raise CorruptTrace("%s: cannot be opened as HDF5 (%s); the file is truncated or damaged"
                               % (path, exc)) from None
        try:
            self._read_root()
        except Exception:
            try:
                self._file.close()
            except Exception:  # noqa: BLE001  # h5py 2.10 may fail to close a damaged file: the first error is the news
                pass
            self._failed()
            raise

    def _failed(self) -> None:
        """Raise why the source failed to fetch what HDF5 read, if it did: then the file's
        damage is unknown, and what HDF5 said of it is not the news."""
        failure = getattr(self._source, "failure", None)
        if failure is not None:
            raise failure from None

    def _open(self) -> h5py.File:
        if self._source is None:
            return h5py.File(self.path, "r")
        opened = h5py.File(self._source, "r")
        _through_python.add(opened)
        return opened

    def _read_root(self) -> None:
        try:
            attrs = self._file.attrs
            names = set(attrs.keys())
        except Exception as exc:
            raise CorruptTrace("%s: root attributes unreadable (%s)" % (self.path, short(exc, typed=False))) from None
        if ATTR_FORMAT not in names:
            raise NotATrace("%s is an HDF5 file but not a tracekit golden (no %r attribute)"
                            % (self.path, ATTR_FORMAT))
        header = self.header
        try:
            version = int(attrs[ATTR_FORMAT])
            header.producer = text(attr(attrs, ATTR_PRODUCER, "?"))
            header.created = text(attr(attrs, ATTR_CREATED, "?"))
            header.nsteps = int(attrs[ATTR_STEPS])
            header.recovered = bool(attr(attrs, ATTR_RECOVERED, False))
        except Exception as exc:
            raise CorruptTrace("%s: bad root attributes (%s)" % (self.path, short(exc, typed=False))) from None
        if version > FORMAT_VERSION:
            raise NewerFormat("%s is in golden format %d (written by %s); this tracekit reads format %d: "
                              "upgrade tracekit" % (self.path, version, header.producer, FORMAT_VERSION))
        if version < 1:
            raise CorruptTrace("%s: bad format version %d" % (self.path, version))
        header.format_version = version
        try:
            raw = self._file[META_DATASET]
            if raw.dtype != np.uint8 or raw.ndim != 1:
                raise ValueError("the metadata is %s %s, not 1-d uint8" % (raw.dtype, raw.shape))
            if raw.size > _metadata.MAX_META_BYTES or raw.id.get_storage_size() != raw.size:  # before reading
                raise ValueError("metadata declared %d bytes, of which %d stored (at most %d)"
                                 % (raw.size, raw.id.get_storage_size(), _metadata.MAX_META_BYTES))
            data = np.asarray(raw[()], dtype=np.uint8).tobytes()
            crc = attr(raw.attrs, ATTR_CRC)  # goldens written before it was stored have none
            if crc is not None and int(crc) != blob_crc(data):
                raise ValueError("its checksum does not match")
            header.meta_checked = crc is not None
            meta = _metadata.unpack(data)
            if not isinstance(meta, dict):
                raise ValueError("metadata is not a map")
            catalog = meta.pop("catalog", [])
            # Every tensor listed has a dataset in the file, each a few hundred bytes of HDF5 at least.
            if not isinstance(catalog, list) or len(catalog) > max(self._max_values, len(data) // CATALOG_ENTRY_BYTES):
                raise ValueError("a catalog of %s entries in a file of %d bytes" % (
                    len(catalog) if isinstance(catalog, list) else "no", self._size))
            header.catalog = [TensorInfo.from_dict(d) for d in catalog]
            header.meta = meta
            if version >= BLOCKS_VERSION:
                self._blocks = Blocks(self._file)
                count = self._blocks.steps
            else:
                steps = self._file.get(STEPS_GROUP)
                count = 0 if steps is None else len(steps)
            header.has_initial = INITIAL_GROUP in self._file
        except Exception as exc:
            raise CorruptTrace("%s: metadata unreadable (%s); the file is damaged"
                               % (self.path, short(exc, 500, typed=False))) from None
        if count != header.nsteps:
            raise CorruptTrace("%s: says %d steps but holds %d; the file is damaged"
                               % (self.path, header.nsteps, count))

    def _block(self, first: int) -> bytes:
        """The bytes of the block of steps at step `first`, checked against its crc32."""
        ref = self._ref(self._file[block_path(first)])
        if ref.desc.dtype != "|u1" or len(ref.desc.shape) != 1 or ref.desc.delta_base is not None \
                or ref.desc.shape[0] > _metadata.MAX_META_BYTES:
            raise ValueError("the block of steps at step %d is no blob of at most %d bytes"
                             % (first, _metadata.MAX_META_BYTES))
        data, crc = self._decode(first, BLOCKS_GROUP, str(first), 0, ref)  # other tools' filters too
        if crc is None:
            crc = values.checksum(data)
        if crc != ref.desc.crc and crc != FRAMES_CHECKED:
            raise ValueError("the block of steps at step %d does not match its checksum" % first)
        return data.tobytes()

    def _group(self, step: int) -> h5py.Group:
        # Kept for the step being read: finding it walks the link index of /steps each time.
        found = self._groups.get(step)
        if found is None:
            found = self._file[step_path(step)]
            _keep(self._groups, step, found)
        return found

    def _index(self, step: int) -> Optional[Index]:
        """The step's index attribute, parsed (None in goldens written before tracekit kept one)."""
        found = self._indexes.get(step)
        if found is not None or step in self._indexes:
            return found
        if self._blocks is not None and step != INITIAL_STEP:
            raw = self._blocks.entry(step, self._block)[1]
            index = parse_index(raw, max(self._max_values, len(raw) // LEAF_WIRE_BYTES), self._size)
        else:
            raw = blob(self._group(step).attrs, ATTR_INDEX)
            index = None if raw is None else parse_index(raw, self._max_values, self._size)
        _keep(self._indexes, step, index)
        return index

    def _info(self, step: int) -> Dict[str, Any]:
        if self._blocks is not None and step != INITIAL_STEP:
            raw: Optional[bytes] = self._blocks.entry(step, self._block)[0]
        else:
            raw = blob(self._group(step).attrs, ATTR_INFO)
        info = {} if raw is None else _metadata.unpack(raw)
        if not isinstance(info, dict):
            raise ValueError("the step's info is no map")
        return info

    def _keys(self, step: int) -> List[Tuple[str, str]]:
        index = self._index(step)
        return list(index) if index is not None else self._listed(step)

    def _listed(self, step: int) -> List[Tuple[str, str]]:
        """The step's values as its groups and datasets list them (format 2: those with a chunked leaf)."""
        if self._blocks is not None and step_path(step) not in self._file:
            return []
        group = self._group(step)
        out = []
        for kind in group.keys():
            if kind not in STORED_ORDER:
                raise ValueError("unknown kind group %r" % kind)
            out.extend((kind, unescape_name(link)) for link in group[kind].keys())
        return out

    def entry(self, step: int, kind: str, name: str) -> Tuple[Optional[list], List[LeafRef]]:
        index = self._index(step)
        if index is not None:
            return self._indexed(step, kind, name, index)
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

    def _indexed(self, step: int, kind: str, name: str, index: Index) -> Tuple[Optional[list], List[LeafRef]]:
        """Leaf references from the step's index: a plain leaf's bytes are in it, so its dataset is
        never opened (the per-tensor cost of a step of thousands of scalars); a chunked leaf's
        dataset is opened for its chunks only (cross_check holds its attributes to the index)."""
        found = index.get((kind, name))
        if found is None:
            raise KeyError(make_key(kind, name))
        spec, leaves = found
        refs = []
        for i, wire in enumerate(leaves):
            if wire.get("l") == values.PLAIN:
                refs.append(LeafRef(plain_leaf(wire), wire["v"]))
            else:
                path = value_path(step, kind, name) + ("" if spec is None else "/%d" % i)
                refs.append(LeafRef(chunked_leaf(wire), _Dataset(self, path)))
        return spec, refs

    def cross_check(self, step: int) -> List[str]:
        """Where the step's index and its datasets disagree (tracekit verify: hdf5_check.py)."""
        from .hdf5_check import cross_check

        return cross_check(self, step)

    def walk(self) -> Tuple[str, ...]:
        """What reading every value asks of HDF5: each step's group and attributes, its list of
        values, and each stored leaf a read opens (a chunked leaf's dataset, its creation
        properties and its chunks, read raw, not decoded; in goldens without a step index, every
        dataset with its attributes; a dataset re-packed with other filters decoded by HDF5, as
        the reader has it decoded). Returns what HDF5 raised on the way: only
        damage HDF5 finds and crashes matter here (_screen.py). verify's cross-check, which
        opens every dataset, runs in a child process of its own."""
        quietly = Quietly()
        steps = ([INITIAL_STEP] if self.header.has_initial else []) + list(range(self.header.nsteps))
        for step in steps:
            quietly(self._info, step)
            for kind, name in quietly(self._keys, step) or ():
                found = quietly(self.entry, step, kind, name)
                for ref in found[1] if found else ():
                    if ref.desc.layout != values.CHUNKED:
                        quietly(self.plain, ref)
                    elif quietly(self.declared_chunks, ref) is not None and \
                            quietly(self.fallback, ref, damage=False) is None:
                        quietly(lambda: [None for _ in self.chunks(ref)])
        return tuple(quietly.damage)

    def _ref(self, ds: h5py.Dataset) -> LeafRef:
        """A finished golden keeps a leaf's descriptor as HDF5 facts and attributes."""
        attrs = ds.attrs
        logical = attr(attrs, ATTR_LOGICAL)
        form = attr(attrs, ATTR_FORM)
        lshape = attr(attrs, ATTR_LOGICAL_SHAPE)
        base = attr(attrs, ATTR_DELTA_BASE)  # present on XOR-delta encoded snapshots only
        shape = tuple(int(d) for d in ds.shape)
        chunked = ds.chunks is not None
        dtype = np.dtype(ds.dtype)
        if dtype.hasobject:  # variable-length strings or arrays, references: tracekit never writes them
            raise ValueError("dataset %s has an HDF5 type tracekit does not write (%s)" % (ds.name, ds.dtype))
        desc = LeafDescriptor(
            layout=values.CHUNKED if chunked else values.PLAIN, shape=shape, dtype=dtype.str,
            logical=None if logical is None else text(logical), form=values.ARRAY if form is None else text(form),
            crc=int(attrs[ATTR_CRC]), logical_shape=None if lshape is None else tuple(int(d) for d in lshape),
            chunk=tuple(ds.chunks) if chunked else None,
            delta_base=None if base is None else step_of_path(text(base)),
            nbytes=None if chunked else dtype.itemsize * int(np.prod(shape, dtype=np.int64)))
        return LeafRef(desc, ds)

    def opened(self, path: str) -> h5py.h5d.DatasetID:
        return h5py.h5d.open(self._file.id, path.encode("utf-8"))  # a third of h5py's File[path] cost

    def chunks(self, ref: LeafRef) -> Iterator[Tuple[Tuple[int, ...], int, bytes]]:
        dsid = ref.loc.id
        for offset in chunk_offsets(ref.desc.shape, ref.desc.chunk):
            with phil:  # h5py does not take its own lock for direct chunk reads
                mask, payload = dsid.read_direct_chunk(tuple(offset))
            yield tuple(offset), mask, payload

    def stored_chunks(self, ref: LeafRef) -> Optional[int]:
        dsid = ref.loc.id
        with phil:
            count = getattr(dsid, "get_num_chunks", None)  # h5py >= 3, not the legacy world's 2.10
            if count is not None:
                return int(count())
            return 0 if dsid.get_storage_size() == 0 else None  # there, only "none at all" is known

    def fallback(self, ref: LeafRef) -> Optional[np.ndarray]:
        # A golden re-packed by other HDF5 tools may use other filters: let HDF5 decode those.
        plist = ref.loc.id.get_create_plist()
        filters = tuple(plist.get_filter(i)[0] for i in range(plist.get_nfilters()))
        if filters == (FILTER_SHUFFLE, FILTER_ZSTD):
            return None
        out = np.empty(ref.desc.shape, dtype=ref.desc.numpy_dtype)
        h5py.Dataset(ref.loc.id).read_direct(out)
        return out

    def plain(self, ref: LeafRef) -> np.ndarray:
        if isinstance(ref.loc, bytes):  # from the step's index
            return np.frombuffer(ref.loc, dtype=ref.desc.numpy_dtype).reshape(ref.desc.shape).copy()
        stored, nbytes = ref.loc.id.get_storage_size(), ref.desc.nbytes
        if nbytes is None or stored != nbytes:  # before allocating what the shape declares
            raise ValueError("the dataset holds %d bytes, its shape and type %d" % (stored, nbytes))
        out = np.empty(ref.desc.shape, dtype=ref.desc.numpy_dtype)
        if out.size:
            ref.loc.read_direct(out)
        return out

    def refresh(self) -> None:
        self._groups = collections.OrderedDict()
        # HDF5 keeps a few KB for every object opened until its file is closed (measured: 2.5 KB
        # a dataset, so 25 MB for 10,000): closing and reopening the file returns them.
        self._file.close()
        self._file = self._open()

    def close(self) -> None:
        self._file.close()
        if self._source is not None:
            self._source.close()
