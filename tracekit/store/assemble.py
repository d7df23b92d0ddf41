"""Turn a journal into the HDF5 golden: a new file, then an atomic rename.

Chunk payloads are copied as they are (`write_direct_chunk`), never recompressed.
A process killed while assembling leaves the journal untouched; assembling again
(`tracekit recover`) finishes the job.
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO, Callable, Dict, Optional

import h5py
import numpy as np
from h5py import h5d, h5p, h5s, h5t, h5z

from . import codec, metadata, values
from .catalog import CatalogBuilder
from .format import (ATTR_CRC, ATTR_CREATED, ATTR_DELTA_BASE, ATTR_ENCODING, ATTR_FORM, ATTR_FORMAT,
                     ATTR_INFO, ATTR_LOGICAL, ATTR_PRODUCER, ATTR_RECOVERED, ATTR_STEPS, ATTR_STRUCTURE,
                     FILTER_SHUFFLE, FILTER_ZSTD, FORMAT_VERSION, INITIAL_STEP, META_DATASET, escape_name,
                     step_path, value_path)
from .journal import Committed, read_payload, scan

LIBVER = ("v110", "v110")  # compact chunk indexes; readable by HDF5 >= 1.10 (both environments)
VLEN_BYTES = h5py.special_dtype(vlen=np.dtype("uint8"))


def tmp_path(path: str) -> str:
    return path + ".assembling"


def opaque(data: bytes) -> np.void:
    """Bytes as an HDF5 opaque attribute (h5py reads it back as np.void; .tobytes())."""
    return np.void(data)


def assemble(journal_path: str, out_path: str, recovered: Optional[Dict[str, Any]] = None) -> Committed:
    """Write the golden for the journal's committed steps; returns what was committed.
    `recovered` (what recovery found) marks a golden made from an unfinished journal."""
    tmp = tmp_path(out_path)
    with open(journal_path, "rb") as fh:
        committed = Committed(scan(journal_path, fh))
        catalog = CatalogBuilder()
        with h5py.File(tmp, "w", libver=LIBVER) as f:
            f.attrs[ATTR_FORMAT] = FORMAT_VERSION
            f.attrs[ATTR_PRODUCER] = str(committed.open["producer"])
            f.attrs[ATTR_CREATED] = str(committed.open["created"])
            nsteps = 0
            for step in committed.order:
                info, records = committed.steps[step]
                group = f.require_group(step_path(step))
                group.attrs[ATTR_INFO] = opaque(metadata.pack(info))
                for record in records:
                    _write_value(group, record.header, record.offset, fh)
                    catalog.add(step, record.header["k"], record.header["n"], record.header["st"],
                                record.header["leaves"])
                nsteps += step != INITIAL_STEP
            f.attrs[ATTR_STEPS] = nsteps
            f.attrs[ATTR_RECOVERED] = recovered is not None
            meta = dict(committed.meta)
            if recovered is not None:
                meta["recovered"] = recovered
            meta["catalog"] = [t.to_dict() for t in catalog.entries()]
            f.create_dataset(META_DATASET, data=np.frombuffer(metadata.pack(meta), dtype=np.uint8))
    _fsync(tmp)
    os.replace(tmp, out_path)
    _fsync(os.path.dirname(os.path.abspath(out_path)))
    return committed


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories
    finally:
        os.close(fd)


def _write_value(group: h5py.Group, header: Dict[str, Any], offset: int, fh: BinaryIO) -> None:
    kind, name, spec, leaves = header["k"], header["n"], header["st"], header["leaves"]
    parent = group.get(kind)
    if parent is None:
        parent = group.create_group(kind, track_order=True)  # keeps recording order
    link = escape_name(name)
    if spec is None:
        _write_leaf(parent, link, leaves[0], offset, fh, lambda base: "/" + value_path(base, kind, name))
        return
    sub = parent.create_group(link, track_order=True)
    sub.attrs[ATTR_STRUCTURE] = opaque(metadata.pack(spec))
    for i, desc in enumerate(leaves):
        offset = _write_leaf(sub, str(i), desc, offset, fh,
                             lambda base, i=i: "/%s/%d" % (value_path(base, kind, name), i))


def _write_leaf(parent: h5py.Group, link: str, desc: Dict[str, Any], offset: int, fh: BinaryIO,
                base_path: Callable[[int], str]) -> int:
    """Create one leaf dataset from its journal payload at `offset`; returns the next offset."""
    layout, shape, dtype = desc["l"], tuple(desc["sh"]), np.dtype(desc["dt"])
    if layout == values.CHUNKED:
        chunk = tuple(desc["ch"])
        dset = _chunked_dataset(parent, link, shape, dtype, chunk, int(desc.get("lv", 1)))
        for off, mask, size in desc["cs"]:
            dset.id.write_direct_chunk(tuple(off), read_payload(fh, offset, size), mask)
            offset += size
    elif layout == values.PLAIN:
        raw = read_payload(fh, offset, desc["n"])
        offset += desc["n"]
        dset = parent.create_dataset(link, data=np.frombuffer(raw, dtype=dtype).reshape(shape))
    else:
        blob = codec.decompress_blob(read_payload(fh, offset, desc["n"]), desc["raw"])
        offset += desc["n"]
        items = values.strings_from_blob(blob, desc["cnt"])
        data = np.empty(len(items), dtype=VLEN_BYTES)
        for i, item in enumerate(items):
            data[i] = np.frombuffer(item, dtype=np.uint8)
        dset = parent.create_dataset(link, shape=shape, dtype=VLEN_BYTES)
        if items:  # low-level: h5py's high level guesses shapes from equal-length strings
            dset.id.write(h5s.ALL, h5s.ALL, data.reshape(shape))
    dset.attrs[ATTR_CRC] = np.uint32(desc["crc"])
    if desc.get("lg") is not None:
        dset.attrs[ATTR_LOGICAL] = desc["lg"]
    if desc.get("f", values.ARRAY) != values.ARRAY:
        dset.attrs[ATTR_FORM] = desc["f"]
    if desc.get("e"):
        dset.attrs[ATTR_ENCODING] = desc["e"]
        dset.attrs[ATTR_DELTA_BASE] = base_path(desc["b"])
    return offset


def _chunked_dataset(parent: h5py.Group, link: str, shape: tuple, dtype: np.dtype, chunk: tuple,
                     level: int) -> h5py.Dataset:
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_chunk(chunk)
    dcpl.set_filter(FILTER_SHUFFLE, h5z.FLAG_OPTIONAL, (dtype.itemsize,))
    dcpl.set_filter(FILTER_ZSTD, h5z.FLAG_OPTIONAL, (level,))
    space = h5s.create_simple(shape, shape)
    lcpl = h5p.create(h5p.LINK_CREATE)
    lcpl.set_char_encoding(h5t.CSET_UTF8)
    dsid = h5d.create(parent.id, link.encode("utf-8"), h5t.py_create(dtype, logical=True), space,
                      dcpl=dcpl, lcpl=lcpl)
    return h5py.Dataset(dsid)


class RecoverResult(object):
    """What `recover` did: `action` is "none" (already a golden) or "assembled"."""

    def __init__(self, path: str, action: str, steps: int, dropped_values: int, reason: Optional[str]) -> None:
        self.path = path
        self.action = action
        self.steps = steps
        self.dropped_values = dropped_values
        self.reason = reason


def recover(path: str) -> RecoverResult:
    """Make the unfinished trace at `path` (a journal a killed writer left) a golden of its
    committed steps, in place. A finished golden is left alone."""
    from .reader import open_trace

    with open_trace(path) as trace:  # raises a clear TracekitError for anything unreadable
        if trace.complete:
            return RecoverResult(path, "none", len(trace), 0, None)
        reason = trace.problem
    with open(path, "rb") as fh:
        committed = Committed(scan(path, fh))
    note = {"reason": reason, "dropped_values": committed.dropped}
    assemble(path, path, recovered=note)
    steps = len(committed.order) - (INITIAL_STEP in committed.steps)
    return RecoverResult(path, "assembled", steps, committed.dropped, reason)
