"""The far side of a TraceWriter: its files, and the sink thread that fills them.

The calling thread hands over values as items, in order. The sink thread puts each
value into the HDF5 golden (_golden.py) and hands the I/O thread (_ordered_io.py)
what must reach the disk in order: the value's chunk payloads, then its journal
record, then, per step, the commit record. Memory is bounded by a byte budget: a
value counts against it from hand-over until the I/O thread has written it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import queue
import threading
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from .._threads import start_thread
from . import values
from ._format import beside, identity
from ._golden import GoldenFile, LeafData, fsync_dir
from ._journal import JournalWriter
from ._lock import remove_stale
from ._ordered_io import OrderedIO
from ._wire import MetaRecord, OpenRecord, StepRecord, ValueRecord
from .catalog import CatalogBuilder


@dataclass(frozen=True)
class Value:
    record: ValueRecord  # without leaves: the pool is still encoding them
    encoded: "concurrent.futures.Future[List[LeafData]]"
    nbytes: int  # counted against the byte budget until written
    digested: Tuple[Tuple[str, str, Tuple[int, ...], str], ...] = ()  # a step's digests: (kind, name, shape, dtype)


@dataclass(frozen=True)
class Commit:
    record: StepRecord


@dataclass(frozen=True)
class Drop:
    step: int  # an aborted step attempt: its values are never committed


@dataclass(frozen=True)
class Meta:
    record: MetaRecord


@dataclass(frozen=True)
class Flush:
    closing: bool = False  # the sink thread ends after it


Item = Union[Value, Commit, Drop, Meta, Flush]


class FileSink:
    """Opens the journal and the golden at `path` (OSError if it cannot) and starts the sink
    thread. The calling thread uses put/reserve/wait; the rest runs on the sink and I/O threads."""

    def __init__(self, path: str, journal_path: str, opening: OpenRecord, max_pending_bytes: int,
                 replace_stale: bool = False) -> None:
        self.path = path
        self.journal_path = journal_path
        self.data_path = path + opening.data  # renamed to `path` when finished
        self.token = opening.token
        # The journal first: it is the lock that makes this the only recording to this path
        # (FileExistsError if a live one holds it), and a data file without it would pass
        # for a finished golden. A journal no process holds is an interrupted recording's.
        try:
            self.journal = JournalWriter(journal_path, opening)
        except FileExistsError:
            # Only a journal that is still there, and no live process's, is an interrupted
            # recording's: one that vanished meanwhile was a recording finishing right now.
            if not (replace_stale and remove_stale(journal_path, vanished_ok=False)):
                raise
            self.journal = JournalWriter(journal_path, opening)  # FileExistsError: another writer came first
        try:
            with contextlib.suppress(FileNotFoundError):  # what an interrupted recording left
                os.remove(self.data_path)
            self.io = OrderedIO()
            self.golden = GoldenFile(self.data_path, opening.token, opening.producer, opening.created, io=self.io)
        except BaseException:
            self.journal.close(sync=False, remove=True)
            raise
        self.meta: Dict[str, Any] = dict(opening.meta)
        self.catalog = CatalogBuilder()
        self.max_pending_bytes = max_pending_bytes
        self.pending_bytes = 0
        self.peak_pending_bytes = 0
        self.commits_written = 0
        self.stored_bytes = 0  # the values' stored bytes so far (what a size budget counts)
        self.stored_values = 0
        self.error: Optional[BaseException] = None
        # Two conditions on one lock, so a waiter wakes only for what it waits for: the
        # calling thread waits for room (values written) or for progress (commits, drains).
        lock = threading.Lock()
        self._room = threading.Condition(lock)
        self._progress = threading.Condition(lock)
        self._queue: "queue.Queue[Item]" = queue.Queue()
        self._uncommitted: List[ValueRecord] = []  # sink thread only
        self._digested: List[Tuple[str, str, Tuple[int, ...], str]] = []
        self._thread = start_thread("writer", self._drain)

    # ---- the calling thread ----------------------------------------------------------------

    def put(self, item: Item) -> None:
        self._queue.put(item)

    def failure(self) -> Optional[BaseException]:
        return self.error if self.error is not None else self.io.error

    def drained(self) -> bool:
        return self._queue.unfinished_tasks == 0

    def reserve(self, nbytes: int) -> None:
        """Wait until `nbytes` more fit the budget (one value always fits), or a write failed."""
        with self._room:
            while self.pending_bytes > 0 and self.pending_bytes + nbytes > self.max_pending_bytes \
                    and self.failure() is None:
                self._room.wait(0.5)
            self.pending_bytes += nbytes
            self.peak_pending_bytes = max(self.peak_pending_bytes, self.pending_bytes)

    def wait(self, ready: Callable[[], bool]) -> None:
        """Wait until ready() (asked again at each commit or drain) or a write failed."""
        with self._progress:
            while not ready() and self.failure() is None:
                self._progress.wait(0.5)

    def stop(self) -> None:
        """Let the sink thread write what it was handed, and end."""
        self._queue.put(Flush(closing=True))
        self._thread.join()

    def finish(self, steps: int, found: Any) -> str:
        """Complete the golden (after stop()); it is finished the moment its journal is gone.
        `found`: the identity of what was at the path when the recording started (_format.identity).
        A golden put there since (another recording that finished as this one started) is not
        replaced: this one is kept beside it (_format.beside). Returns where the golden is."""
        meta = dict(self.meta, catalog=[t.to_dict() for t in self.catalog.entries()])
        self.golden.finish(meta, steps, recovered=False)  # closed and synced
        self.io.close()
        where = self.path
        if self.data_path != self.path:
            # Another golden put there since this recording started (a recording finishing as this
            # one began; an update, which renames under the goldens directory's lock) stays. A
            # golden removed meanwhile is no reason to keep this one aside.
            now = identity(self.path)
            if now is not None and now != found:
                where = beside(self.path, self.token)
            os.replace(self.data_path, where)  # a golden already there is replaced in one step
            fsync_dir(self.path)
        self.journal.close(sync=False, remove=True)
        fsync_dir(self.path)
        return where

    def abandon(self) -> None:
        """Close what is open, quietly: the journal describes what was committed."""
        for stop in (self.io.close, self.golden.abandon, self.journal.close):
            with contextlib.suppress(Exception):
                stop()

    # ---- the sink thread -------------------------------------------------------------------

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if self.failure() is None:
                    self._write(item)
            except BaseException as exc:  # kept for the caller; the thread must keep draining
                self.error = exc
            finally:
                if isinstance(item, Value) and self.failure() is not None:
                    self.release(item.nbytes)  # the I/O thread will not
                with self._progress:
                    self._queue.task_done()
                    if self._queue.unfinished_tasks == 0 or self.failure() is not None:
                        self._progress.notify_all()
                        self._room.notify_all()
            if isinstance(item, Flush) and item.closing:
                return

    def _write(self, item: Item) -> None:
        io = self.io
        if isinstance(item, Value):
            encoded = item.encoded.result()
            record = item.record
            descs = self.golden.write_value(record.step, record.kind, record.name, record.structure, encoded)
            record = replace(record, leaves=tuple(descs))
            self.stored_bytes += sum(desc.stored_bytes for desc in descs)
            self.stored_values += 1
            inline = [data for desc, data in encoded if desc.layout == values.PLAIN]
            io.submit(self.journal.append, record, inline)  # after its chunks
            io.submit(self.release, item.nbytes)
            self._uncommitted.append(record)
            self._digested.extend(item.digested)
        elif isinstance(item, Commit):
            self.golden.set_info(item.record.step, item.record.info)
            io.submit(self._commit, item.record)  # the step's chunks reach the OS before its commit
            for record in self._uncommitted:
                self.catalog.add(record.step, record)
            for digested in self._digested:
                self.catalog.add_digest(*digested)
            self._uncommitted, self._digested = [], []
        elif isinstance(item, Drop):
            self.golden.drop_step(item.step)
            self._uncommitted, self._digested = [], []
        elif isinstance(item, Meta):
            self.meta.update(item.record.meta)
            io.submit(self.journal.append, item.record)
        else:  # Flush
            io.submit(self.journal.flush)
            io.drain()

    # ---- the I/O thread --------------------------------------------------------------------

    def _commit(self, record: StepRecord) -> None:
        self.journal.append(record)
        self.journal.flush()
        with self._progress:
            self.commits_written += 1
            self._progress.notify_all()

    def release(self, nbytes: int) -> None:
        with self._room:
            self.pending_bytes -= nbytes
            self._room.notify_all()
