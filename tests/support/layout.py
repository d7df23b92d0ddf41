"""Editing a golden's HDF5 layout in tests: a step's index or info wherever the format keeps it
(format 2: in its block of steps; format 1: in its group's attributes); tools/format1.py rewrites
a golden in format 1's layout. Runs in both environments (Python 3.7 syntax)."""

from __future__ import annotations

import zlib

import numpy as np

from tools.format1 import as_format1, block_entries, to_format1  # noqa: F401  # the tests' one import
from tracekit.store import _metadata as metadata
from tracekit.store._format import ATTR_BLOCK_STEPS, BLOCKS_GROUP, step_path


def _block_of(f, step):
    """(path of the block holding `step`, its entries [[step, info, index], ...])."""
    return block_entries(f, max(k for k in (int(name) for name in f[BLOCKS_GROUP]) if k <= step))


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
