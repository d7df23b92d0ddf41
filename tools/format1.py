"""A format-2 golden rewritten in the layout of format 1 (docs/FORMAT.md, "Format 1"), as tracekit
wrote goldens before blocks of steps: for the tests that hold the reader of older goldens to the
same values, and for benchmarks that set the two layouts side by side. h5py and msgpack only;
runs in both environments (Python 3.7 syntax).

    .venv/bin/python tools/format1.py GOLDEN    # rewrites it in place
"""

from __future__ import annotations

import sys
import zlib
from typing import Any, Dict, List, Tuple

import numpy as np

from tracekit.store import _codec, _metadata as metadata
from tracekit.store._format import BLOCKS_GROUP, INITIAL_GROUP, STEPS_GROUP, block_path, escape_name, step_path
from tracekit.store.values import ARRAY, CHUNKED, PLAIN, PLAIN_MAX_BYTES


def block_entries(f: Any, first: int) -> Tuple[str, List[list]]:
    """(path, [[step, info, index], ...]) of the block of steps starting at `first`, decoded by
    tracekit's codec (its chunks are compressed with a filter h5py may lack); a block stored raw
    (as tests leave one they edited) is read as it is."""
    dataset = f[block_path(first)]
    if dataset.chunks is None:
        return dataset.name, metadata.unpack(dataset[()].tobytes())
    parts = []
    for offset in _codec.chunk_offsets(dataset.shape, dataset.chunks):
        mask, payload = dataset.id.read_direct_chunk(tuple(offset))
        parts.append(_codec.decode_chunk(payload, mask, dataset.chunks, np.dtype(np.uint8)))
    return dataset.name, metadata.unpack(np.concatenate(parts).tobytes()[:dataset.shape[0]])


def as_format1(path: str) -> str:
    """Rewrite the format-2 golden at `path` in format 1's layout (to_format1); returns the path."""
    import h5py

    with h5py.File(path, "r+") as f:
        to_format1(f)
    return path


def to_format1(f: Any) -> None:
    """Rewrite a golden open for writing in format 1's layout: each step's info and index as
    attributes of its group, and a dataset for every leaf, plain ones included. A golden in
    format 1 already is left as it is."""
    if BLOCKS_GROUP not in f:
        return
    blobs: Dict[int, Tuple[bytes, bytes]] = {}
    for first in [int(name) for name in f[BLOCKS_GROUP]]:
        blobs.update((step, (info, index)) for step, info, index in block_entries(f, first)[1])
    for step, (info, index) in blobs.items():
        group = f.require_group(step_path(step))
        for name, data in (("info", info), ("index", index)):
            group.attrs[name] = np.void(data)
            group.attrs[name + "_crc32"] = np.uint32(zlib.crc32(data))
    for step in ([-1] if INITIAL_GROUP in f else []) + sorted(blobs):
        group = f[step_path(step)]
        entries = metadata.unpack(group.attrs["index"].tobytes())
        for kind, name, spec, leaves in entries:
            link = "%s/%s" % (kind, escape_name(name))
            if spec is not None:  # a structure's group, even of no leaves
                sub = group.require_group(link)
                if "structure" not in sub.attrs:
                    sub.attrs["structure"] = np.void(metadata.pack(spec))
            for i, wire in enumerate(leaves):
                if wire["l"] == PLAIN:
                    leaves[i] = _dataset(group, link if spec is None else "%s/%d" % (link, i), wire)
        data = metadata.pack(entries)  # a light leaf format 1 chunked is described so
        group.attrs["index"] = np.void(data)
        group.attrs["index_crc32"] = np.uint32(zlib.crc32(data))
    del f[BLOCKS_GROUP]
    f.attrs["tracekit_format"] = 1
    assert len(f[STEPS_GROUP]) == len(blobs)


def _dataset(group: Any, link: str, wire: Dict[str, Any]) -> Dict[str, Any]:
    """A plain leaf's dataset as format 1 stored it: plain up to PLAIN_MAX_BYTES, chunked and
    compressed beyond (an input batch format 2 keeps in its block); returns its index entry."""
    from h5py import h5d, h5p, h5s, h5t, h5z

    from tracekit.store._format import FILTER_SHUFFLE, FILTER_ZSTD
    from tracekit.store._wire import LeafDescriptor

    data = np.frombuffer(wire["v"], dtype=np.dtype(wire["dt"])).reshape(wire["sh"])
    if data.ndim == 0 or data.nbytes <= PLAIN_MAX_BYTES:
        dataset = group.create_dataset(link, data=data)
    else:
        chunk = _codec.chunk_shape(data.shape, data.dtype.itemsize)
        dcpl = h5p.create(h5p.DATASET_CREATE)
        dcpl.set_chunk(chunk)
        dcpl.set_filter(FILTER_SHUFFLE, h5z.FLAG_OPTIONAL, (data.dtype.itemsize,))
        dcpl.set_filter(FILTER_ZSTD, h5z.FLAG_OPTIONAL, (1,))
        parent, leaf = link.rsplit("/", 1)
        dsid = h5d.create(group.require_group(parent).id, leaf.encode("utf-8"), h5t.py_create(data.dtype, logical=True),
                          h5s.create_simple(data.shape, data.shape), dcpl=dcpl)
        for offset, mask, payload in _codec.encode_array(data, chunk, None):
            dsid.write_direct_chunk(tuple(offset), payload, mask)
        dataset = group[link]
        desc = LeafDescriptor.from_wire(wire)
        wire = LeafDescriptor(layout=CHUNKED, shape=desc.shape, dtype=desc.dtype, logical=desc.logical,
                              form=desc.form, crc=desc.crc, logical_shape=desc.logical_shape,
                              chunk=tuple(chunk)).to_wire()
    dataset.attrs["crc32"] = np.uint32(wire["crc"])
    if wire.get("lg") is not None:
        dataset.attrs["logical_dtype"] = np.bytes_(wire["lg"].encode())
    if wire.get("ls") is not None:
        dataset.attrs["logical_shape"] = np.array(wire["ls"], dtype=np.int64)
    if wire.get("f", ARRAY) != ARRAY:
        dataset.attrs["form"] = np.bytes_(wire["f"].encode())
    return wire


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(as_format1(name))
