"""Editing a golden's HDF5 layout in tests: a step's index wherever the format keeps it (format 2:
in its block of steps; format 1: in its group's attributes), and a format-2 golden rewritten in
the layout of format 1, as tracekit wrote goldens before blocks of steps (to hold the reader of
older goldens to the same values). Runs in both environments (Python 3.7 syntax)."""

from __future__ import annotations

import zlib

import numpy as np

from tracekit.store import _codec, _metadata as metadata
from tracekit.store._format import (ATTR_BLOCK_STEPS, BLOCKS_GROUP, INITIAL_GROUP, STEPS_GROUP, block_path,
                                    escape_name, step_path)
from tracekit.store.values import ARRAY, PLAIN


def _block_of(f, step):
    """(path of the block holding `step`, its entries [[step, info, index], ...]) in a format-2 file."""
    first = max(k for k in (int(name) for name in f[BLOCKS_GROUP]) if k <= step)
    dataset = f[block_path(first)]
    if dataset.chunks is None:  # as write_block left it
        return dataset.name, metadata.unpack(dataset[()].tobytes())
    # decoded by tracekit's codec: the chunks are compressed with a filter h5py may lack
    parts = [_codec.decode_chunk(dataset.id.read_direct_chunk(tuple(offset))[1],
                                 dataset.id.read_direct_chunk(tuple(offset))[0], dataset.chunks, np.dtype(np.uint8))
             for offset in _codec.chunk_offsets(dataset.shape, dataset.chunks)]
    return dataset.name, metadata.unpack(np.concatenate(parts).tobytes()[:dataset.shape[0]])


def write_block(f, path, entries):
    """Replace a block of steps with `entries`, stored raw with a checksum to match (an edit the
    checksum cannot see)."""
    data = np.frombuffer(metadata.pack(entries), dtype=np.uint8)
    del f[path]
    dataset = f.create_dataset(path, data=data)
    dataset.attrs["crc32"] = np.uint32(zlib.crc32(data.tobytes()))
    dataset.attrs[ATTR_BLOCK_STEPS] = len(entries)


def blocked(f):
    return BLOCKS_GROUP in f


def get_blob(f, step, name):
    """A step's `info` or `index` blob, decoded."""
    if blocked(f) and step >= 0:
        _, entries = _block_of(f, step)
        entry = next(e for e in entries if e[0] == step)
        return metadata.unpack(entry[1 if name == "info" else 2])
    return metadata.unpack(f[step_path(step)].attrs[name].tobytes())


def set_blob(f, step, name, value, checksum=True):
    """Rewrite a step's `info` or `index` blob (`value`, or bytes as they are); with `checksum`,
    its checksum to match."""
    data = value if isinstance(value, bytes) else metadata.pack(value)
    if blocked(f) and step >= 0:
        path, entries = _block_of(f, step)
        for entry in entries:
            if entry[0] == step:
                entry[1 if name == "info" else 2] = data
        write_block(f, path, entries)
        return
    group = f[step_path(step)]
    old = group.attrs.get(name + "_crc32")
    group.attrs[name] = np.void(data)
    group.attrs[name + "_crc32"] = np.uint32(zlib.crc32(data)) if checksum or old is None else old


def as_format1(path):
    """Rewrite the format-2 golden at `path` in format 1's layout (to_format1)."""
    import h5py

    with h5py.File(path, "r+") as f:
        to_format1(f)
    return path


def to_format1(f):
    """Rewrite a format-2 golden open for writing in format 1's layout: each step's info and
    index as attributes of its group, and a dataset for every leaf, plain ones included."""
    if not blocked(f):
        return
    blobs = {}
    for first in [int(name) for name in f[BLOCKS_GROUP]]:
        blobs.update((step, (info, index)) for step, info, index in _block_of(f, first)[1])
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


def _plain_dataset(group, link, wire):
    data = np.frombuffer(wire["v"], dtype=np.dtype(wire["dt"])).reshape(wire["sh"])
    dataset = group.create_dataset(link, data=data)
    dataset.attrs["crc32"] = np.uint32(wire["crc"])
    if wire.get("lg") is not None:
        dataset.attrs["logical_dtype"] = np.bytes_(wire["lg"].encode())
    if wire.get("ls") is not None:
        dataset.attrs["logical_shape"] = np.array(wire["ls"], dtype=np.int64)
    if wire.get("f", ARRAY) != ARRAY:
        dataset.attrs["form"] = np.bytes_(wire["f"].encode())
