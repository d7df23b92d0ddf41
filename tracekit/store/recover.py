"""`recover`: make a golden of what a killed recording committed.

A killed writer leaves its journal beside an unfinished HDF5 file. The journal
lists every committed value and where its chunks lie in that file, so recovery
builds a new golden from them (never trusting the unfinished file's own HDF5
metadata) and atomically puts it in place, then removes the journal.
"""

from __future__ import annotations

import os
import uuid
from typing import Any, BinaryIO, Dict, List, Optional

from ..errors import CorruptTrace
from ..keys import INITIAL_STEP
from . import values
from .catalog import CatalogBuilder
from .format import journal_path
from .golden import GoldenFile, fsync_dir
from .journal import Committed, read_payload, scan


class RecoverResult:
    """What `recover` did: `action` is "none" (already a golden), "recovered", or
    "stale-journal" (a journal left over from an earlier recording was removed)."""

    def __init__(self, path: str, action: str, steps: int, dropped_values: int, reason: Optional[str]) -> None:
        self.path = path
        self.action = action
        self.steps = steps
        self.dropped_values = dropped_values
        self.reason = reason


def tmp_path(path: str) -> str:
    return path + ".recovering"


def recover(path: str) -> RecoverResult:
    """Turn the unfinished trace at `path` into a golden of its committed steps, in place."""
    from .reader import open_trace

    with open_trace(path) as trace:  # a clear TracekitError for anything unreadable
        complete, steps, reason = trace.complete, len(trace), trace.problem
    journal = journal_path(path)
    if complete:
        if os.path.exists(journal):  # from an earlier recording whose file was since replaced
            os.remove(journal)
            return RecoverResult(path, "stale-journal", steps, 0, "removed a journal of another recording")
        return RecoverResult(path, "none", steps, 0, None)
    with open(journal, "rb") as jfh:
        committed = Committed(scan(journal, jfh))
        data = open(path, "rb") if os.path.exists(path) else None
        try:
            _rebuild(path, committed, jfh, data, reason)
        finally:
            if data is not None:
                data.close()
    os.replace(tmp_path(path), path)
    os.remove(journal)
    fsync_dir(path)
    return RecoverResult(path, "recovered", steps, committed.dropped, reason)


def _rebuild(path: str, committed: Committed, jfh: BinaryIO, data: Optional[BinaryIO], reason: Optional[str]) -> None:
    opening = committed.open
    golden = GoldenFile(tmp_path(path), uuid.uuid4().hex, str(opening["producer"]), str(opening["created"]))
    catalog = CatalogBuilder()
    try:
        for step in committed.order:
            info, records = committed.steps[step]
            for record in records:
                h = record.header
                leaves = _leaf_data(h["leaves"], record.offset, jfh, data, path)
                golden.write_value(step, h["k"], h["n"], h["st"], leaves)
                catalog.add(step, h["k"], h["n"], h["st"], h["leaves"])
            golden.set_info(step, info)
        meta = dict(committed.meta)
        meta["recovered"] = {"reason": reason, "dropped_values": committed.dropped}
        meta["catalog"] = [t.to_dict() for t in catalog.entries()]
        nsteps = len(committed.order) - (INITIAL_STEP in committed.steps)
        golden.finish(meta, nsteps, recovered=True)
    except BaseException:
        golden.abandon()
        raise


def _leaf_data(descs: List[Dict[str, Any]], offset: int, jfh: BinaryIO, data: Optional[BinaryIO],
               path: str) -> List[Any]:
    """(descriptor, payload) pairs for GoldenFile.write_value, read back from where they lie."""
    out = []
    for desc in descs:
        if desc["l"] == values.CHUNKED:
            if data is None:
                raise CorruptTrace("%s is missing: its journal lists chunks in it" % path)
            chunks = [(off, mask, read_payload(data, addr, size)) for off, mask, size, addr in desc["cs"]]
            out.append((desc, chunks))
        else:
            out.append((desc, read_payload(jfh, offset, desc["n"])))
            offset += desc["n"]
    return out
