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
from tracekit.store.values import ARRAY, PLAIN


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
        for kind, name, spec, leaves in metadata.unpack(group.attrs["index"].tobytes()):
            link = "%s/%s" % (kind, escape_name(name))
            if spec is not None:  # a structure's group, even of no leaves
                sub = group.require_group(link)
                if "structure" not in sub.attrs:
                    sub.attrs["structure"] = np.void(metadata.pack(spec))
            for i, wire in enumerate(leaves):
                if wire["l"] == PLAIN:
                    _plain_dataset(group, link if spec is None else "%s/%d" % (link, i), wire)
    del f[BLOCKS_GROUP]
    f.attrs["tracekit_format"] = 1
    assert len(f[STEPS_GROUP]) == len(blobs)


def _plain_dataset(group: Any, link: str, wire: Dict[str, Any]) -> None:
    data = np.frombuffer(wire["v"], dtype=np.dtype(wire["dt"])).reshape(wire["sh"])
    dataset = group.create_dataset(link, data=data)
    dataset.attrs["crc32"] = np.uint32(wire["crc"])
    if wire.get("lg") is not None:
        dataset.attrs["logical_dtype"] = np.bytes_(wire["lg"].encode())
    if wire.get("ls") is not None:
        dataset.attrs["logical_shape"] = np.array(wire["ls"], dtype=np.int64)
    if wire.get("f", ARRAY) != ARRAY:
        dataset.attrs["form"] = np.bytes_(wire["f"].encode())


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(as_format1(name))
