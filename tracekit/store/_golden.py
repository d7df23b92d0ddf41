"""Writing the HDF5 golden itself, value by value, as the trace is recorded.

Chunk payloads are handed to HDF5 already shuffled and compressed
(`write_direct_chunk`), so they are written once, straight into the golden. HDF5
does its I/O through a file object of ours (h5py's "fileobj" driver), which
notes the address each chunk lands at: the journal keeps those addresses, so the
chunks of a killed recording can be found without HDF5's own (then unreliable)
metadata. Each step's info and index (small values' bytes inside) go into blocks of steps,
written as they fill. Until `finish()` the file is not a valid golden; the journal beside it
says so.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
from dataclasses import replace
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import h5py
import numpy as np
from h5py import h5a, h5d, h5p, h5s, h5t, h5z

from ..errors import TracekitError
from ..keys import INITIAL_STEP
from . import _codec, _metadata, values
from ._format import (ATTR_BLOCK_STEPS, ATTR_CRC, ATTR_CREATED, ATTR_DELTA_BASE, ATTR_FORM, ATTR_FORMAT, ATTR_INDEX,
                      ATTR_INFO, ATTR_LOGICAL, ATTR_LOGICAL_SHAPE, ATTR_PRODUCER, ATTR_RECOVERED, ATTR_STEPS,
                      ATTR_STRUCTURE, BLOB_CRC_SUFFIX, BLOCK_BYTES, BLOCK_STEPS, BLOCKS_GROUP, FILTER_SHUFFLE,
                      FILTER_ZSTD, FORMAT_VERSION, META_DATASET, USERBLOCK_SIZE, blob_crc, block_path, escape_name,
                      step_path, userblock, value_path)
from ._h5compat import phil
from ._ordered_io import OrderedIO
from ._wire import Chunk, LeafDescriptor

LIBVER = ("v110", "v110")  # compact chunk indexes; readable by HDF5 >= 1.10 (both environments)

# What a leaf brings to write_value: its journal descriptor, and either its chunk
# payloads [(offset, mask, bytes)] (chunked) or its raw bytes (plain).
LeafData = Tuple[LeafDescriptor, Any]


def fixed(text: str) -> np.bytes_:
    """A string attribute stored in the object header (checksummed), not in the global
    heap as h5py's default variable-length strings are: a damaged heap can crash HDF5 1.10."""
    return np.bytes_(text.encode("utf-8"))


def _same_payload(data: Any, expect: bytes) -> bool:
    """Is this write our chunk? A metadata write of the same size could happen meanwhile, so
    compare content: all of it when small, else both ends (a compressed chunk's ends are
    unlike any HDF5 metadata block's; copying it whole to compare would cost a memcpy)."""
    if len(expect) <= 2 * _PROBE:
        return bytes(data) == expect
    view = memoryview(data)
    return bytes(view[:_PROBE]) == expect[:_PROBE] and bytes(view[-_PROBE:]) == expect[-_PROBE:]


_PROBE = 4096


class _AddressSpy:
    """The file object HDF5 writes through. It notes where an expected chunk payload is
    written, and with an OrderedIO hands the payload to it rather than writing it here;
    metadata I/O stays synchronous. HDF5 calls these methods holding h5py's lock: they
    never wait for another thread, and HDF5 never reads a chunk back while writing."""

    def __init__(self, path: str, io: Optional[OrderedIO]) -> None:
        self._file = open(path, "w+b", buffering=0)  # unbuffered: a write is in the OS when it returns
        self._fd = self._file.fileno()
        self._io = io
        self._pos = 0
        self._end = 0  # end of the furthest chunk handed to the OrderedIO
        self._expect: Optional[bytes] = None
        self.found: Optional[int] = None

    def expect(self, payload: bytes) -> None:
        self._expect, self.found = payload, None

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence == os.SEEK_END:
            self._pos = max(self._file.seek(0, os.SEEK_END), self._end) + pos
        else:
            self._pos = self._file.seek(pos, whence)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, size: int = -1) -> bytes:
        data = os.pread(self._fd, size, self._pos) if size >= 0 else self._file.read()
        self._pos += len(data)
        return data

    def readinto(self, buf: Any) -> int:
        data = self.read(len(memoryview(buf)))
        memoryview(buf).cast("B")[:len(data)] = data
        return len(data)

    def write(self, data: Any) -> int:
        expect = self._expect
        if expect is not None and len(data) == len(expect) and _same_payload(data, expect):
            self.found, self._expect = self._pos, None
            if self._io is not None:  # HDF5 handed over our own payload's memory: queue that object
                self._io.submit(_pwrite_all, self._fd, expect, self._pos)
                self._pos += len(expect)
                self._end = max(self._end, self._pos)
                return len(expect)
        _pwrite_all(self._fd, data, self._pos)
        self._pos += len(data)
        return len(data)

    def truncate(self, size: Optional[int] = None) -> int:
        # HDF5 truncates to its end of allocation, past every chunk, queued ones included.
        return self._file.truncate(size)

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        self._file.close()


def _pwrite_all(fd: int, data: Any, pos: int) -> None:
    view = memoryview(data).cast("B")
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], pos + done)


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """HDF5 is not re-entrant, and it calls back into Python (our file object). A cyclic
    garbage collection run inside such a callback could free another h5py object, whose
    release re-enters HDF5 from the same thread. So no collection runs while this thread
    is inside HDF5 through the golden."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _hdf5_call(method: Any) -> Any:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with _no_gc():
            return method(*args, **kwargs)
    return call


class GoldenFile:
    """An HDF5 golden under construction. One thread at a time."""

    @_hdf5_call
    def __init__(self, path: str, token: str, producer: str, created: str,
                 io: Optional[OrderedIO] = None) -> None:
        """With `io`, chunk payloads are written by it: drain it before `finish()`."""
        self.path = path
        self._spy = _AddressSpy(path, io)
        self._file = h5py.File(self._spy, "w", libver=LIBVER, userblock_size=USERBLOCK_SIZE)
        self._spy.seek(0)
        self._spy.write(userblock(token))  # HDF5 never touches its user block
        self._dcpls: Dict[tuple, Any] = {}  # property lists are costly to build per dataset
        self._lcpl = h5p.create(h5p.LINK_CREATE)
        self._lcpl.set_char_encoding(h5t.CSET_UTF8)
        self._scalar = h5s.create(h5s.SCALAR)
        self._groups: Dict[Tuple[int, str], h5py.Group] = {}
        self._index: List[list] = []  # the open step's values, for its index
        self._block: List[list] = []  # the committed steps not yet in a block: [step, info, index]
        self._block_bytes = 0
        self._io = io
        self._file.attrs[ATTR_FORMAT] = FORMAT_VERSION
        self._file.attrs[ATTR_PRODUCER] = fixed(producer)
        self._file.attrs[ATTR_CREATED] = fixed(created)

    # ---- values ----------------------------------------------------------------------------

    @_hdf5_call
    def write_value(self, step: int, kind: str, name: str, spec: Optional[list],
                    leaves: Sequence[LeafData]) -> List[LeafDescriptor]:
        """Create the value's datasets (a chunked leaf's: a plain leaf lies in the step's index
        alone); returns the leaf descriptors with chunk addresses."""
        chunked = [desc.layout == values.CHUNKED for desc, _ in leaves]
        link = escape_name(name)
        if spec is None:
            descs = [self._leaf(lambda: self._kind_group(step, kind), link, leaves[0],
                                lambda base: "/" + value_path(base, kind, name))]
        else:
            sub = self._kind_group(step, kind).create_group(link) if any(chunked) else None
            if sub is not None:
                sub.attrs[ATTR_STRUCTURE] = np.void(_metadata.pack(spec))
            descs = [self._leaf(lambda: sub, str(i), leaf, lambda base, i=i: "/%s/%d" % (value_path(base, kind, name), i))
                     for i, leaf in enumerate(leaves)]
        self._index.append(index_entry(kind, name, spec, descs, [data for _, data in leaves]))
        return descs

    def _kind_group(self, step: int, kind: str) -> h5py.Group:
        """/steps/<step>/<kind>, created on first use and kept for the step's other values."""
        group = self._groups.get((step, kind))
        if group is None:
            group = self._groups[(step, kind)] = self._file.require_group(step_path(step) + "/" + kind)
        return group

    def _leaf(self, parent: Callable[[], Any], link: str, leaf: LeafData, base_path: Any) -> LeafDescriptor:
        """A chunked leaf's dataset in the group `parent()` gives; a plain leaf has none (its
        bytes are in the step's index)."""
        desc, data = leaf
        if desc.layout != values.CHUNKED:
            return desc
        assert desc.chunk is not None  # LeafDescriptor checks it for chunked leaves
        dset = self._chunked(parent(), link, desc.shape, desc.numpy_dtype, desc.chunk,
                             1 if desc.level is None else desc.level)
        chunks = []
        for offset, mask, payload in data:
            self._spy.expect(payload)
            with phil:  # h5py does not take its lock here, and our file object releases the GIL
                dset.id.write_direct_chunk(tuple(offset), payload, mask)
            if self._spy.found is None:
                raise TracekitError("%s: HDF5 did not write chunk %s of %s as one piece; please report this"
                                    % (self.path, offset, dset.name))
            chunks.append(Chunk(tuple(offset), mask, len(payload), self._spy.found))
        desc = replace(desc, chunks=tuple(chunks))
        self._attribute(dset, ATTR_CRC, np.array(desc.crc, dtype="<u4"))
        if desc.logical is not None:
            dset.attrs[ATTR_LOGICAL] = fixed(desc.logical)
        if desc.logical_shape is not None:
            dset.attrs[ATTR_LOGICAL_SHAPE] = np.array(desc.logical_shape, dtype=np.int64)
        if desc.form != values.ARRAY:
            dset.attrs[ATTR_FORM] = fixed(desc.form)
        if desc.delta_base is not None:  # XOR is the only delta encoding: its base path says it all
            self._attribute(dset, ATTR_DELTA_BASE, np.array(fixed(base_path(desc.delta_base))))
        return desc

    def _attribute(self, dset: h5py.Dataset, name: str, value: np.ndarray) -> None:
        """A scalar attribute through the low-level API: several per dataset, on the hot path."""
        if value.dtype.kind == "S":
            tid = h5t.C_S1.copy()
            tid.set_size(value.dtype.itemsize)
            tid.set_strpad(h5t.STR_NULLPAD)  # as h5py stores bytes: no terminator eats the last char
        else:
            tid = h5t.py_create(value.dtype)
        h5a.create(dset.id, name.encode("ascii"), tid, self._scalar).write(value)

    def _chunked(self, parent: h5py.Group, link: str, shape: tuple, dtype: np.dtype, chunk: tuple,
                 level: int) -> h5py.Dataset:
        key = (chunk, dtype.itemsize, level)
        dcpl = self._dcpls.get(key)
        if dcpl is None:
            dcpl = self._dcpls[key] = h5p.create(h5p.DATASET_CREATE)
            dcpl.set_chunk(chunk)
            dcpl.set_filter(FILTER_SHUFFLE, h5z.FLAG_OPTIONAL, (dtype.itemsize,))
            dcpl.set_filter(FILTER_ZSTD, h5z.FLAG_OPTIONAL, (level,))
        dsid = h5d.create(parent.id, link.encode("utf-8"), h5t.py_create(dtype, logical=True),
                          h5s.create_simple(shape, shape), dcpl=dcpl, lcpl=self._lcpl)
        return h5py.Dataset(dsid)

    # ---- steps -----------------------------------------------------------------------------

    @_hdf5_call
    def set_info(self, step: int, info: Dict[str, Any]) -> None:
        """The step is complete: its info, and the index of its values, go into its block of
        steps (the initial state's into attributes of its group)."""
        blobs = [_metadata.pack(info), _metadata.pack(self._index)]
        self._groups, self._index = {}, []
        if step == INITIAL_STEP:
            group = self._file.require_group(step_path(step))
            for name, data in zip((ATTR_INFO, ATTR_INDEX), blobs):
                group.attrs[name] = np.void(data)
                group.attrs[name + BLOB_CRC_SUFFIX] = np.array(blob_crc(data), dtype="<u4")
            return
        self._block.append([step] + blobs)
        self._block_bytes += sum(len(data) for data in blobs)
        if len(self._block) >= BLOCK_STEPS or self._block_bytes >= BLOCK_BYTES:
            self._write_block()

    def _write_block(self) -> None:
        """The steps since the last block, as one compressed dataset (docs/FORMAT.md, "Steps"). The
        journal already holds their values: a block is written for readers of the finished golden."""
        if not self._block:
            return
        data = np.frombuffer(_metadata.pack(self._block), dtype=np.uint8)
        chunk = _codec.chunk_shape(data.shape, 1)
        desc = LeafDescriptor(layout=values.CHUNKED, shape=tuple(data.shape), dtype=data.dtype.str, logical=None,
                              form=values.ARRAY, crc=values.checksum(data), chunk=tuple(chunk))
        first = self._block[0][0]
        self._leaf(lambda: self._file.require_group(BLOCKS_GROUP), block_path(first).split("/")[-1],
                   (desc, _codec.encode_array(data, chunk, None)), None)
        self._file[block_path(first)].attrs[ATTR_BLOCK_STEPS] = len(self._block)
        self._block, self._block_bytes = [], 0

    @_hdf5_call
    def drop_step(self, step: int) -> None:
        """Forget an aborted step attempt (its index is used again)."""
        self._groups, self._index = {}, []
        if step_path(step) in self._file:
            del self._file[step_path(step)]

    # ---- the end ---------------------------------------------------------------------------

    @_hdf5_call
    def finish(self, meta: Dict[str, Any], steps: int, recovered: bool) -> None:
        """Write the metadata, close, and sync: the file is a golden once this returns."""
        self._write_block()
        if self._io is not None:
            self._io.drain()  # the block's chunks are in the file before it closes
        self._file.attrs[ATTR_STEPS] = steps
        self._file.attrs[ATTR_RECOVERED] = recovered
        data = _metadata.pack(meta)
        dset = self._file.create_dataset(META_DATASET, data=np.frombuffer(data, dtype=np.uint8))
        dset.attrs[ATTR_CRC] = np.array(blob_crc(data), dtype="<u4")  # raw data has no HDF5 checksum
        self._file.close()
        os.fsync(self._spy.fileno())
        self._spy.close()

    @_hdf5_call
    def abandon(self) -> None:
        """Close after a failure; the file stays unfinished (the journal describes it)."""
        try:
            self._file.close()
        finally:
            self._spy.close()


def index_entry(kind: str, name: str, spec: Optional[list], descs: Sequence[LeafDescriptor],
                data: Sequence[Any]) -> list:
    """One value in its step's index: a reader lists a step and learns how each leaf is stored
    from one attribute, and takes small leaves from it, without opening their datasets."""
    leaves = []
    for desc, raw in zip(descs, data):
        wire = replace(desc, chunks=()).to_wire()  # chunk addresses are the journal's business
        if desc.layout == values.PLAIN:
            wire["v"] = bytes(raw)
        leaves.append(wire)
    return [kind, name, spec, leaves]


def fsync_dir(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories
    finally:
        os.close(fd)
