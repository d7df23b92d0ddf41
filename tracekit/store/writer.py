"""TraceWriter: streams steps into a golden, compressing on background threads.

The calling thread only validates and (unless told not to) copies each value; a
thread pool checksums, shuffles and compresses; one sink thread puts each value
into the HDF5 golden (golden.py); one I/O thread (ordered_io.py) writes, in
order, the chunk payloads into the golden and a record of each value, with its
chunk addresses, into a journal beside it (journal.py). Memory is bounded by
`max_pending_bytes` (values handed over but not yet written) plus, with delta
encoding, one previous snapshot of each variable.

`end_step()` returns once the *previous* step is committed in the journal, so at
most one step is ever in flight: a process killed at any moment loses only that
step, and the journal lets a reader (and `recover`) find every committed chunk.
`close()` finishes the HDF5 file and removes the journal.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import datetime
import os
import queue
import threading
import uuid
import weakref
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

import numpy as np

from .._version import __version__
from ..errors import TraceWriteError, UsageError
from ..keys import INITIAL_STEP, Kind, check_name, make_key, step_label
from . import _codec, values
from .catalog import CatalogBuilder
from ._format import DELTA_KINDS, FORMAT_VERSION, KEYFRAME_INTERVAL, journal_path
from ._golden import GoldenFile, LeafData, fsync_dir
from ._journal import JournalWriter
from ._ordered_io import OrderedIO
from ._wire import LeafDescriptor, MetaRecord, OpenRecord, StepRecord, ValueRecord

DEFAULT_LEVEL = None  # tuned fast zstd parameters (_codec.FAST_FLOATS); an int is a zstd level
DEFAULT_PENDING = 256 << 20

_open_writers: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    # An uncaught exception ends the script: still leave a golden of the completed steps.
    for writer in list(_open_writers):
        try:
            writer.close()
        except Exception:
            pass


def producer_string() -> str:
    import sys

    import h5py

    return "tracekit %s (Python %s, h5py %s, HDF5 %s)" % (
        __version__, sys.version.split()[0], h5py.version.version, h5py.version.hdf5_version)


def encode_leaves(leaves: List[values.Leaf], bases: Optional[list], level: Optional[int]) -> List[LeafData]:
    """Per leaf: (descriptor, data): chunk payloads for the golden, or the raw bytes of a
    small (plain) leaf, which the journal keeps too. Runs on a pool thread."""
    out: List[LeafData] = []
    for i, leaf in enumerate(leaves):
        facts = dict(layout=leaf.layout, shape=tuple(leaf.array.shape), dtype=leaf.dtype, logical=leaf.logical,
                     form=leaf.form, crc=values.checksum(leaf.array),
                     # strings: the blob's shape is not the array's
                     logical_shape=leaf.shape if leaf.shape != leaf.array.shape else None)
        if leaf.layout == values.CHUNKED:
            chunk = _codec.chunk_shape(leaf.array.shape, leaf.array.dtype.itemsize)
            base = bases[i] if bases else None
            desc = LeafDescriptor(chunk=tuple(chunk), level=level, delta_base=None if base is None else base[0],
                                  **facts)
            out.append((desc, _codec.encode_array(leaf.array, chunk, level, None if base is None else base[1])))
        else:
            raw = leaf.array.tobytes()
            out.append((LeafDescriptor(nbytes=len(raw), **facts), raw))
    return out


# What the calling thread hands the sink thread, in order.
@dataclass(frozen=True)
class _Value:
    record: ValueRecord  # without leaves: the pool is still encoding them
    encoded: "concurrent.futures.Future[List[LeafData]]"
    nbytes: int  # counted against max_pending_bytes until written


@dataclass(frozen=True)
class _Commit:
    record: StepRecord


@dataclass(frozen=True)
class _Drop:
    step: int


@dataclass(frozen=True)
class _Meta:
    record: MetaRecord


@dataclass(frozen=True)
class _Flush:
    closing: bool = False  # the sink thread ends after it


_Item = Union[_Value, _Commit, _Drop, _Meta, _Flush]


class TraceWriter:
    """Write a trace step by step. Use `tracekit.create(path)`.

    >>> with tracekit.create("run.h5", meta={"user": {"model": "mlp"}}) as w:
    ...     with w.initial():
    ...         w.add("var", "dense/kernel:0", kernel)
    ...     for batch in data:
    ...         with w.step(info={"global_step": 1}):
    ...             w.add("loss", "loss", loss)
    """

    def __init__(self, path: str, mode: str = "w", meta: Optional[Mapping[str, Any]] = None,
                 level: Optional[int] = DEFAULT_LEVEL, delta: bool = True, workers: Optional[int] = None,
                 max_pending_bytes: int = DEFAULT_PENDING, producer: Optional[str] = None) -> None:
        if mode not in ("w", "w-", "x"):
            raise UsageError("mode must be 'w' (overwrite) or 'w-'/'x' (fail if it exists), got %r" % (mode,))
        self.path = os.fspath(path)
        self.level = None if level is None else int(level)
        self.delta = bool(delta)
        self.max_pending_bytes = int(max_pending_bytes)
        self._journal_path = journal_path(self.path)
        opening = OpenRecord(
            format=FORMAT_VERSION, producer=producer or producer_string(),
            created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            token=uuid.uuid4().hex, meta=_with_environment(meta))
        self._meta = dict(opening.meta)
        self._open_files(mode, opening)

        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers or min(4, os.cpu_count() or 1), thread_name_prefix="tracekit-encode")
        self._queue: "queue.Queue[_Item]" = queue.Queue()
        # Two conditions on one lock, so a waiter wakes only for what it waits for: the
        # calling thread waits for room (values written) or for progress (commits, drains).
        lock = threading.Lock()
        self._room = threading.Condition(lock)
        self._progress = threading.Condition(lock)
        self._pending_bytes = 0
        self.peak_pending_bytes = 0
        self._commits_sent = 0
        self._commits_written = 0
        self._error: Optional[BaseException] = None
        self._catalog = CatalogBuilder()
        self._uncommitted: List[ValueRecord] = []  # sink only
        self._sink = threading.Thread(target=self._drain, name="tracekit-sink", daemon=True)
        self._sink.start()

        self._attempt = 0  # attempt ids: an aborted step's records are never committed
        self._step: Optional[int] = None  # index of the open step
        self._info: Dict[str, Any] = {}
        self._step_keys: set = set()
        self._step_last: Dict[str, Tuple[int, List[np.ndarray], int]] = {}
        self._last: Dict[str, Tuple[int, List[np.ndarray], int]] = {}  # delta bases
        self._has_initial = False
        self.steps = 0  # committed steps
        self.closed = False
        _open_writers.add(self)

    def _open_files(self, mode: str, opening: OpenRecord) -> None:
        if mode != "w" and (os.path.exists(self.path) or os.path.exists(self._journal_path)):
            raise TraceWriteError("%s already exists; use mode='w' to overwrite it" % self.path)
        try:
            for stale in (self.path, self._journal_path):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(stale)
            # The journal first: a file at the path without one would pass for a finished golden.
            self._journal = JournalWriter(self._journal_path)
            self._journal.append(opening)
            self._journal.flush()
            self._io = OrderedIO()
            self._golden = GoldenFile(self.path, opening.token, opening.producer, opening.created, io=self._io)
        except OSError as exc:
            raise TraceWriteError("cannot write a trace to %s: %s; choose a writable path"
                                  % (self.path, exc.strerror or exc)) from None

    # ---- steps ---------------------------------------------------------------------------

    def begin_step(self, info: Optional[Mapping[str, Any]] = None, initial: bool = False) -> int:
        """Open the next step (or the initial state); returns its index (-1 for the initial state)."""
        self._check_open()
        if self._step is not None:
            raise UsageError("%s: step %s is still open; call end_step() or abort_step() first"
                             % (self.path, self._step))
        if initial:
            if self._has_initial:
                raise UsageError("%s: the initial state was already recorded" % self.path)
            self._step = INITIAL_STEP
        else:
            self._step = self.steps
        self._attempt += 1
        self._info = dict(info or {})
        self._step_keys = set()
        self._step_last = {}
        return self._step

    def add(self, kind: "str | Kind", name: str, value: Any, copy: bool = True) -> None:
        """Record `value` (an array, scalar, or nested dict/list/tuple of them) as kind/name.

        With copy=False the arrays are referenced, not copied: pass it only for
        arrays nobody will modify afterwards (fresh `Session.run` results).
        """
        self._check_open()
        if self._step is None:
            raise UsageError("%s: add() outside a step; call begin_step() first" % self.path)
        try:
            kind = Kind.parse(kind).value
            name = check_name(name)
        except UsageError as exc:
            raise UsageError("%s, %s: %s" % (self.path, step_label(self._step), exc)) from None
        key = make_key(kind, name)
        where = "%s, %s, %s" % (self.path, step_label(self._step), key)
        if key in self._step_keys:
            raise UsageError("%s: recorded twice in one step; each tensor is recorded once per step" % where)
        spec, raw_leaves = values.flatten(value, where)
        leaves = [values.make_leaf(v, where) for v in raw_leaves]
        if copy:
            for leaf in leaves:
                if isinstance(leaf.array, np.ndarray):
                    leaf.array = leaf.array.copy()
        bases = self._delta_bases(kind, key, leaves)
        nbytes = sum(leaf.nbytes for leaf in leaves)
        self._wait_for_room(nbytes)
        future = self._pool.submit(encode_leaves, leaves, bases, self.level)
        record = ValueRecord(self._attempt, self._step, kind, name, spec)
        self._step_keys.add(key)
        self._queue.put(_Value(record, future, nbytes))

    def _delta_bases(self, kind: str, key: str, leaves: List[values.Leaf]) -> Optional[list]:
        """Per leaf (base step, base array) to XOR against, or None; remembers this snapshot."""
        if not self.delta or kind not in DELTA_KINDS:
            return None
        if not all(leaf.layout == values.CHUNKED and leaf.array.dtype.itemsize in (1, 2, 4, 8)
                   for leaf in leaves):
            return None
        arrays = [leaf.array for leaf in leaves]
        last = self._last.get(key)
        usable = (last is not None and last[2] + 1 < KEYFRAME_INTERVAL and len(last[1]) == len(arrays)
                  and all(a.shape == b.shape and a.dtype == b.dtype for a, b in zip(arrays, last[1])))
        self._step_last[key] = (self._step, arrays, last[2] + 1 if usable else 0)
        if not usable:
            return None
        return [(last[0], base) for base in last[1]]

    def end_step(self, info: Optional[Mapping[str, Any]] = None) -> int:
        """Commit the open step; returns its index. Blocks until the step before it is committed."""
        self._check_open()
        if self._step is None:
            raise UsageError("%s: end_step() without begin_step()" % self.path)
        step = self._step
        full_info = dict(self._info)
        full_info.update(info or {})
        self._queue.put(_Commit(StepRecord(self._attempt, step, full_info, len(self._step_keys))))
        self._last.update(self._step_last)
        self._step = None
        if step == INITIAL_STEP:
            self._has_initial = True
        else:
            self.steps += 1
        self._commits_sent += 1
        self._wait(lambda: self._commits_written >= self._commits_sent - 1)
        return step

    def abort_step(self) -> None:
        """Drop the open step: what was added to it is never committed."""
        if self._step is not None:
            self._queue.put(_Drop(self._step))
        self._step = None
        self._step_keys = set()
        self._step_last = {}

    @contextlib.contextmanager
    def step(self, info: Optional[Mapping[str, Any]] = None) -> Iterator[int]:
        """`with w.step():` commits on success, drops the step if the body raises."""
        with self._scope(lambda: self.begin_step(info)) as index:
            yield index

    @contextlib.contextmanager
    def initial(self, info: Optional[Mapping[str, Any]] = None) -> Iterator[int]:
        """`with w.initial():` records the state before the first step (variables, slots)."""
        with self._scope(lambda: self.begin_step(info, initial=True)) as index:
            yield index

    @contextlib.contextmanager
    def _scope(self, begin: Callable[[], int]) -> Iterator[int]:
        index = begin()
        try:
            yield index
        except BaseException:
            self.abort_step()
            raise
        self.end_step()

    def update_meta(self, meta: Mapping[str, Any]) -> None:
        """Merge top-level keys into the trace's metadata."""
        self._check_open()
        self._queue.put(_Meta(MetaRecord(dict(meta))))

    def flush(self) -> None:
        """Block until everything committed so far is in the journal and the golden."""
        self._check_open()
        self._queue.put(_Flush())
        self._wait(lambda: self._commits_written >= self._commits_sent and self._queue.unfinished_tasks == 0)

    def close(self) -> str:
        """Finish: an open step is dropped, the golden is completed. Returns the path."""
        if self.closed:
            return self.path
        self.closed = True
        _open_writers.discard(self)
        self.abort_step()
        self._queue.put(_Flush(closing=True))
        self._sink.join()
        self._pool.shutdown(wait=True)
        error = self._failure()
        if error is not None:
            self._stop_files()
            raise _write_error(self.path, error)
        meta = dict(self._meta, catalog=[t.to_dict() for t in self._catalog.entries()])
        try:
            self._golden.finish(meta, self.steps, recovered=False)
            self._io.close()
            self._journal.close(sync=False)
            os.remove(self._journal_path)  # the golden is finished the moment its journal is gone
            fsync_dir(self.path)
        except OSError as exc:
            raise _write_error(self.path, exc)
        return self.path

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- the sink thread -----------------------------------------------------------------

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if self._failure() is None:
                    self._write(item)
            except BaseException as exc:  # kept for the caller; the thread must keep draining
                self._error = exc
            finally:
                if isinstance(item, _Value) and self._failure() is not None:
                    self._release(item.nbytes)  # the I/O thread will not
                with self._progress:
                    self._queue.task_done()
                    if self._queue.unfinished_tasks == 0 or self._failure() is not None:
                        self._progress.notify_all()
                        self._room.notify_all()
            if isinstance(item, _Flush) and item.closing:
                return

    def _write(self, item: _Item) -> None:
        io = self._io
        if isinstance(item, _Value):
            encoded = item.encoded.result()
            record = item.record
            descs = self._golden.write_value(record.step, record.kind, record.name, record.structure, encoded)
            record = replace(record, leaves=tuple(descs))
            inline = [data for desc, data in encoded if desc.layout == values.PLAIN]
            io.submit(self._journal.append, record, inline)  # after its chunks
            io.submit(self._release, item.nbytes)
            self._uncommitted.append(record)
        elif isinstance(item, _Commit):
            self._golden.set_info(item.record.step, item.record.info)
            io.submit(self._commit, item.record)  # the step's chunks reach the OS before its commit
            for record in self._uncommitted:
                self._catalog.add(record.step, record)
            self._uncommitted = []
        elif isinstance(item, _Drop):
            self._golden.drop_step(item.step)
            self._uncommitted = []
        elif isinstance(item, _Meta):
            self._meta.update(item.record.meta)
            io.submit(self._journal.append, item.record)
        else:  # _Flush
            io.submit(self._journal.flush)
            io.drain()

    # ---- the I/O thread ------------------------------------------------------------------

    def _commit(self, record: StepRecord) -> None:
        self._journal.append(record)
        self._journal.flush()
        with self._progress:
            self._commits_written += 1
            self._progress.notify_all()

    def _release(self, nbytes: int) -> None:
        with self._room:
            self._pending_bytes -= nbytes
            self._room.notify_all()

    # ---- waiting -------------------------------------------------------------------------

    def _failure(self) -> Optional[BaseException]:
        return self._error if self._error is not None else self._io.error

    def _check_open(self) -> None:
        if self.closed:
            raise UsageError("%s: the writer is closed" % self.path)
        error = self._failure()
        if error is not None:
            self.close_after_error()
            raise _write_error(self.path, error)

    def close_after_error(self) -> None:
        """Stop after a failed write: the journal keeps what was committed (tracekit recover)."""
        if self.closed:
            return
        self.closed = True
        _open_writers.discard(self)
        self._queue.put(_Flush(closing=True))
        self._sink.join()
        self._pool.shutdown(wait=True)
        self._stop_files()

    def _stop_files(self) -> None:
        """Close what is open, quietly: the journal describes what was committed."""
        for stop in (self._io.close, self._golden.abandon, self._journal.close):
            with contextlib.suppress(Exception):
                stop()

    def _wait(self, ready: Callable[[], bool]) -> None:
        with self._progress:
            while not ready() and self._failure() is None:
                self._progress.wait(0.5)
        self._check_open()

    def _wait_for_room(self, nbytes: int) -> None:
        with self._room:
            while self._pending_bytes > 0 and self._pending_bytes + nbytes > self.max_pending_bytes \
                    and self._failure() is None:
                self._room.wait(0.5)
            self._pending_bytes += nbytes
            self.peak_pending_bytes = max(self.peak_pending_bytes, self._pending_bytes)
        self._check_open()


def _with_environment(meta: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The caller's metadata, with the environment fingerprint unless it brings its own."""
    out = dict(meta or {})
    if "environment" not in out:
        from ..environment import fingerprint

        out["environment"] = fingerprint()
    return out


def _write_error(path: str, exc: BaseException) -> Exception:
    if isinstance(exc, OSError):
        return TraceWriteError("writing %s failed: %s; the steps committed before it are kept "
                               "(tracekit recover %s)" % (path, exc.strerror or exc, path))
    return exc if isinstance(exc, Exception) else RuntimeError(repr(exc))


def create(path: str, mode: str = "w", meta: Optional[Mapping[str, Any]] = None, **options: Any) -> TraceWriter:
    """Start writing a trace at `path` ('w' overwrites, 'w-'/'x' refuses an existing file)."""
    return TraceWriter(path, mode=mode, meta=meta, **options)
