"""The append-only journal beside a golden while it is being written.

HDF5 is not crash-safe: a process killed while the library updates its metadata
can leave a file that no longer opens. So while a writer fills the golden it also
appends framed records to `<golden>.journal`: each value with the addresses of its
chunks in the golden (and small payloads inline), and a commit record per step.
A record never changes once written, and a step counts only once its commit is
complete, so a killed writer leaves every committed step readable. The journal
is removed when the golden is finished; its presence means "unfinished".

Layout: JOURNAL_MAGIC, then records. A record is a 16-byte frame
(u32 header length, u32 crc32 of payload length + header, u64 payload length,
little-endian), a msgpack header (one of _wire's records), and the payload (the
plain leaves' bytes of a value record, concatenated).
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Dict, Iterator, List, Optional, Sequence, Tuple

from . import _metadata
from ._format import JOURNAL_MAGIC
from ._lock import create_locked
from ._wire import OpenRecord, Record, StepRecord, ValueRecord, record_from_wire

_FRAME = struct.Struct("<IIQ")
MAX_HEADER = 64 << 20


def _crc(head: bytes, payload_len: int) -> int:
    # Covers the payload length too, so a damaged frame is not taken for a torn tail.
    return zlib.crc32(head, zlib.crc32(struct.pack("<Q", payload_len))) & 0xFFFFFFFF


def _frame(record: Record, size: int = 0) -> bytes:
    head = _metadata.pack(record.to_wire())
    return _FRAME.pack(len(head), _crc(head, size), size) + head


class JournalWriter:
    """Appends records; `flush` hands them to the OS, which keeps them if the process dies.
    The journal is made holding its first record and locked for this writer's life
    (_lock.py): FileExistsError if another recording's journal is there."""

    def __init__(self, path: str, first: Record) -> None:
        fd = create_locked(path, JOURNAL_MAGIC + _frame(first))
        self.path = path
        self._file: BinaryIO = os.fdopen(fd, "ab")

    def append(self, record: Record, payload: Sequence[bytes] = ()) -> int:
        """Write one record; returns the offset of its payload."""
        self._file.write(_frame(record, sum(len(p) for p in payload)))
        offset = self._file.tell()
        for part in payload:
            self._file.write(part)
        return offset

    def flush(self) -> None:
        self._file.flush()

    def close(self, sync: bool = True, remove: bool = False) -> None:
        """Close (releasing the lock); with `remove`, remove the journal first, so no other
        process can take its lock and find it stale in between."""
        if self._file.closed:
            return
        self._file.flush()
        if sync:
            os.fsync(self._file.fileno())
        if remove:
            os.remove(self.path)
        self._file.close()


@dataclass(frozen=True)
class Frame:
    """One whole record as found in the journal: its decoded header and where its payload is."""

    header: Dict[str, Any]
    offset: int  # of the payload
    size: int


@dataclass
class Scan:
    """What a journal holds: its records up to the first incomplete or damaged one."""

    frames: List[Frame] = field(default_factory=list)
    end: str = "truncated"  # "truncated" (ends with the last whole record) | "damaged"
    problem: Optional[str] = None
    file_size: int = 0


def scan(path: str, fh: Optional[BinaryIO] = None) -> Scan:
    """Read record headers (not payloads). Stops quietly at a torn tail; the caller
    decides what an unfinished journal means. Raises ValueError if it is no journal."""
    own = fh is None
    if fh is None:
        fh = open(path, "rb")
    try:
        result = Scan()
        fh.seek(0, os.SEEK_END)
        result.file_size = size = fh.tell()
        fh.seek(0)
        if fh.read(len(JOURNAL_MAGIC)) != JOURNAL_MAGIC:
            raise ValueError("no tracekit journal signature")
        pos = len(JOURNAL_MAGIC)
        result.frames.extend(_frames(fh, pos, size, result))
        return result
    finally:
        if own:
            fh.close()


def _frames(fh: BinaryIO, pos: int, size: int, result: Scan) -> Iterator[Frame]:
    while pos + _FRAME.size <= size:
        fh.seek(pos)
        head_len, head_crc, payload_len = _FRAME.unpack(fh.read(_FRAME.size))
        start = pos + _FRAME.size
        if head_len > MAX_HEADER:
            result.end, result.problem = "damaged", "bad record frame at byte %d" % pos
            return
        if start + head_len + payload_len > size:
            return  # torn tail: the process died while writing this record
        head = fh.read(head_len)
        if _crc(head, payload_len) != head_crc:
            result.end, result.problem = "damaged", "record header checksum mismatch at byte %d" % pos
            return
        try:
            header = _metadata.unpack(head)
        except ValueError as exc:
            result.end, result.problem = "damaged", "undecodable record at byte %d (%s)" % (pos, exc)
            return
        if not isinstance(header, dict) or "t" not in header:
            result.end, result.problem = "damaged", "record without a type at byte %d" % pos
            return
        yield Frame(header, start + head_len, payload_len)
        pos = start + head_len + payload_len


_SEEK = threading.Lock()


def read_payload(fh: BinaryIO, offset: int, size: int) -> bytes:
    if offset < 0 or size < 0 or offset + size > os.fstat(fh.fileno()).st_size:  # before allocating `size`
        raise ValueError("payload of %d bytes at byte %d lies beyond the end of %s" % (size, offset, fh.name))
    if hasattr(os, "pread"):  # no shared file position: readers on several threads (comparison/pipeline.py)
        data = os.pread(fh.fileno(), size, offset)
    else:
        with _SEEK:
            fh.seek(offset)
            data = fh.read(size)
    if len(data) != size:
        raise ValueError("payload at byte %d is cut short" % offset)
    return data


class MalformedRecord(ValueError):
    """A well-framed record whose contents do not fit the schema (a foreign or hand-made journal)."""


@dataclass(frozen=True)
class Committed:
    """A journal's committed steps: for each, its info and value records (with the offset of
    each record's payload) in order. `Committed.of(scan)` builds it."""

    scan: Scan
    open: OpenRecord
    meta: Dict[str, Any]
    steps: Dict[int, Tuple[Dict[str, Any], List[Tuple[ValueRecord, int]]]]
    order: List[int]  # step indices in commit order
    dropped: int  # value records of attempts never committed

    @classmethod
    def of(cls, scanned: Scan) -> "Committed":
        opening: Optional[OpenRecord] = None
        meta: Dict[str, Any] = {}
        steps: Dict[int, Tuple[Dict[str, Any], List[Tuple[ValueRecord, int]]]] = {}
        order: List[int] = []
        pending: Dict[int, List[Tuple[ValueRecord, int]]] = {}
        for frame in scanned.frames:
            try:
                record = record_from_wire(frame.header)
            except (ValueError, TypeError) as exc:
                raise MalformedRecord("%s: %s" % (type(exc).__name__, exc)) from None
            if isinstance(record, OpenRecord):
                opening, meta = record, dict(record.meta)
            elif isinstance(record, ValueRecord):
                pending.setdefault(record.attempt, []).append((record, frame.offset))
            elif isinstance(record, StepRecord):
                written = pending.pop(record.attempt, [])
                if record.count is not None and len(written) != record.count:
                    raise ValueError("step %s commits %s values but %d were written"
                                     % (record.step, record.count, len(written)))
                if record.step not in steps:
                    order.append(record.step)
                steps[record.step] = (record.info, written)
            elif record is not None:  # a MetaRecord
                meta.update(record.meta)
        if opening is None:
            raise ValueError("journal has no opening record")
        return cls(scanned, opening, meta, steps, order, sum(len(v) for v in pending.values()))


def journal_opening(path: str) -> Optional[OpenRecord]:
    """A journal's opening record, or None if it has none that reads."""
    try:
        with open(path, "rb") as fh:
            if fh.read(len(JOURNAL_MAGIC)) != JOURNAL_MAGIC:
                return None
            head_len, _, _ = _FRAME.unpack(fh.read(_FRAME.size))
            if head_len > MAX_HEADER:
                return None
            record = record_from_wire(_metadata.unpack(fh.read(head_len)))
        return record if isinstance(record, OpenRecord) else None
    except (OSError, ValueError, TypeError, KeyError, struct.error):
        return None
