"""`recover`: make a golden of what a killed recording committed.

A killed writer leaves its journal beside an unfinished HDF5 file (path.partial, or
the path itself for recordings made before that). The journal lists every committed
value and where its chunks lie in that file, so recovery
builds a new golden from them (never trusting the unfinished file's own HDF5
metadata) and atomically puts it in place, then removes the journal.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from dataclasses import dataclass, replace
from typing import BinaryIO, List, Optional, Tuple

from ..errors import CorruptTrace, UsageError
from ..keys import INITIAL_STEP
import numpy as np

from . import _codec, _metadata, digest, values
from .catalog import CatalogBuilder
from ._format import DIGESTS_KIND, journal_path
from ._golden import GoldenFile, LeafData, fsync_dir
from ._journal import Committed, read_payload, scan
from ._lock import remove_stale, take
from ._screen import trust
from ._wire import LeafDescriptor


@dataclass(frozen=True)
class RecoverResult:
    """What `recover` did: `action` is "none" (already a golden), "recovered", or
    "stale-journal" (a journal left over from an earlier recording was removed)."""

    path: str
    action: str
    steps: int
    dropped_values: int
    reason: Optional[str]


def tmp_path(path: str) -> str:
    return path + ".recovering"


def recover(path: str) -> RecoverResult:
    """Turn the unfinished trace at `path` into a golden of its committed steps, in place."""
    from ._backends.journal import JournalBackend
    from .opening import open_trace, unfinished_data
    from .reader import Trace
    from .remote import refuse_url

    refuse_url(path, "recover a trace")  # it writes the golden in place
    if os.path.isdir(path):
        raise UsageError("%s is a directory, not a trace: name the golden file a recording was writing" % path)
    journal = journal_path(path)
    busy = UsageError("%s is still being recorded (its journal %s is locked by a running process): recover "
                      "only a recording whose writer was killed or crashed" % (path, journal))
    data_path = unfinished_data(path, journal) if os.path.exists(journal) else None
    # A recovery killed after putting its golden in place and removing the data file, before the
    # journal: the golden is whole, only the journal is left.
    rebuilt = data_path is not None and data_path != path and not os.path.exists(data_path) and os.path.exists(path)
    if data_path is None or rebuilt:  # no recording, or one whose golden is in place
        with open_trace(path) as trace:  # a clear TracekitError for anything unreadable
            steps = len(trace)
        if os.path.exists(journal):  # the writer died between putting its golden in place and removing this
            if not remove_stale(journal):
                raise busy
            return RecoverResult(path, "stale-journal", steps, 0, "removed a journal of another recording")
        return RecoverResult(path, "none", steps, 0, None)
    with Trace(JournalBackend(path, journal, data_path)) as trace:  # a clear TracekitError if unreadable
        steps, reason = len(trace), trace.problem
    lock = take(journal)  # held until the golden is in place: no writer or other recovery meanwhile
    if lock is None:
        raise busy
    try:
        with open(journal, "rb") as jfh:
            committed = Committed.of(scan(journal, jfh))
            data = open(data_path, "rb") if os.path.exists(data_path) else None
            try:
                _rebuild(path, committed, jfh, data, data_path, reason)
            finally:
                if data is not None:
                    data.close()
        try:
            os.replace(tmp_path(path), path)  # a golden there until now is replaced in one step
        except OSError:
            with contextlib.suppress(OSError):  # the recording stays as it was: nothing half-done beside it
                os.remove(tmp_path(path))
            raise
        if data_path != path:
            os.remove(data_path)
        os.remove(journal)
        fsync_dir(path)
        trust(path)  # rebuilt whole by this process, never trusting the unfinished file's HDF5 metadata
    finally:
        os.close(lock)
    return RecoverResult(path, "recovered", steps, committed.dropped, reason)


def _rebuild(path: str, committed: Committed, jfh: BinaryIO, data: Optional[BinaryIO], data_path: str,
             reason: Optional[str]) -> None:
    opening = committed.open
    golden = GoldenFile(tmp_path(path), uuid.uuid4().hex, opening.producer, opening.created)
    catalog = CatalogBuilder()
    try:
        for step in committed.order:
            info, records = committed.steps[step]
            for record, offset in records:
                leaves = _leaf_data(record.leaves, offset, jfh, data, data_path)
                golden.write_value(step, record.kind, record.name, record.structure, leaves)
                catalog.add(step, record)
                if record.kind == DIGESTS_KIND:
                    for described in digest.described(_metadata.unpack(_blob(leaves[0]))):
                        catalog.add_digest(*described)
            golden.set_info(step, info)
        meta = dict(committed.meta)
        meta["recovered"] = {"reason": reason, "dropped_values": committed.dropped}
        meta["catalog"] = [t.to_dict() for t in catalog.entries()]
        nsteps = len(committed.order) - (INITIAL_STEP in committed.steps)
        golden.finish(meta, nsteps, recovered=True)
    except BaseException:
        golden.abandon()
        raise


def _blob(leaf: LeafData) -> bytes:
    """The bytes of a one-dimensional uint8 leaf (a step's digests), decoded from its payload."""
    desc, data = leaf
    if desc.layout != values.CHUNKED:
        return bytes(data)
    parts = [_codec.decode_chunk(payload, mask, desc.chunk, np.dtype(np.uint8))
             for _, mask, payload in sorted(data, key=lambda c: tuple(c[0]))]
    return np.concatenate(parts).tobytes()[:desc.shape[0]] if parts else b""


def _leaf_data(descs: Tuple[LeafDescriptor, ...], offset: int, jfh: BinaryIO, data: Optional[BinaryIO],
               path: str) -> List[LeafData]:
    """(descriptor, payload) pairs for GoldenFile.write_value, read back from where they lie."""
    out: List[LeafData] = []
    for desc in descs:
        if desc.layout == values.CHUNKED:
            if data is None:
                raise CorruptTrace("%s is missing: its journal lists chunks in it" % path)
            chunks = [(c.offset, c.mask, read_payload(data, c.address, c.size)) for c in desc.chunks]
            out.append((replace(desc, chunks=()), chunks))
        else:
            size = desc.nbytes or 0
            out.append((desc, read_payload(jfh, offset, size)))
            offset += size
    return out
