"""TraceWriter: streams steps into a golden, compressing on background threads.

The calling thread only validates and (unless told not to) copies each value; a
thread pool checksums, shuffles and compresses; one sink thread puts each value
into the HDF5 golden (_sink.py, _golden.py); one I/O thread (_ordered_io.py)
writes, in order, the chunk payloads into the golden and a record of each value,
with its chunk addresses, into a journal beside it (_journal.py). Memory is bounded by
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
import uuid
from typing import Any, Callable, Dict, Iterator, Mapping, Optional

import numpy as np

from .._threads import pool
from ..errors import TraceWriteError, UsageError
from ..keys import INITIAL_STEP, LIGHT_KINDS, Kind, check_name, make_key, step_label
from . import digest as digests, structures, values
from ._encode import DeltaBases, PendingDigest, encode_digests, encode_leaves
from . import _format
from ._format import DIGESTS_KIND, DIGESTS_NAME, FORMAT_VERSION, PARTIAL_SUFFIX, identity, journal_path
from ._lock import held
from ._screen import trust
from ._sink import Commit, Drop, FileSink, Flush, Meta, Value
from ._wire import MetaRecord, OpenRecord, StepRecord, ValueRecord
from .writable import check_path, write_error

DEFAULT_LEVEL = None  # tuned fast zstd parameters (_codec.FAST_FLOATS); an int is a zstd level
DEFAULT_PENDING = 256 << 20
# A step's light values kept whole in its index (values.LIGHT_PLAIN_MAX_BYTES each) are at most this
# many bytes together, so that a block of steps stays within what a reader decodes; more are chunked.
STEP_INLINE_BYTES = 16 << 20

# Strong references: a writer its caller dropped without closing still has files open and a
# sink thread running; it is finished at exit (its golden kept), never left to the garbage
# collector, which would close HDF5 files during interpreter shutdown.
_open_writers: "set[TraceWriter]" = set()


@atexit.register
def _close_at_exit() -> None:
    # An uncaught exception ends the script: still leave a golden of the completed steps.
    for writer in list(_open_writers):
        try:
            writer.close()
        except Exception:
            pass


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
                 max_pending_bytes: int = DEFAULT_PENDING, producer: Optional[str] = None,
                 steps_in_flight: int = 1) -> None:
        if mode not in ("w", "w-", "x"):
            raise UsageError("mode must be 'w' (overwrite) or 'w-'/'x' (fail if it exists), got %r" % (mode,))
        self.path = os.fspath(path)
        check_path(self.path)
        # What this recording will replace: a golden another recording puts there while this one
        # runs is never replaced (close() keeps this one beside it and says so).
        self._found = identity(self.path)
        self.level = None if level is None else int(level)
        self.delta = bool(delta)
        self._journal_path = journal_path(self.path)
        opening = OpenRecord(
            format=FORMAT_VERSION, producer=producer or _format.producer_string(),
            created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            token=uuid.uuid4().hex, meta=_with_environment(meta), data=PARTIAL_SUFFIX)
        self._sink = self._open_files(mode, opening, int(max_pending_bytes))

        self._pool = pool("encode", workers or min(4, os.cpu_count() or 1))
        self._commits_sent = 0
        # Steps handed over and not yet committed when end_step returns: 1 loses at most the step in
        # flight to a crash (a recording); more lets encoding lag behind a fast caller (a replay,
        # which can be run again), within max_pending_bytes.
        self.steps_in_flight = max(1, int(steps_in_flight))

        self._attempt = 0  # attempt ids: an aborted step's records are never committed
        self._step: Optional[int] = None  # index of the open step
        self._info: Dict[str, Any] = {}
        self._step_keys: set = set()
        self._inline_bytes = 0  # the open step's light values kept in its index, whole
        # The open step's digests, written at its end: (kind, name, shape, dtype) for the catalog, and
        # the digest being computed on the pool.
        self._digests: "list[PendingDigest]" = []
        self._bases = DeltaBases(self.delta)
        self._has_initial = False
        self.steps = 0  # committed steps
        self.closed = False
        _open_writers.add(self)

    def _open_files(self, mode: str, opening: OpenRecord, max_pending_bytes: int) -> FileSink:
        busy = TraceWriteError("%s is being recorded right now by another writer (its journal %s is locked): "
                               "wait for that recording to end, or record to another path"
                               % (self.path, self._journal_path))
        if mode != "w" and (os.path.exists(self.path) or os.path.exists(self._journal_path)):
            raise busy if held(self._journal_path) else TraceWriteError(
                "%s already exists; use mode='w' to overwrite it" % self.path)
        try:
            return FileSink(self.path, self._journal_path, opening, max_pending_bytes, replace_stale=mode == "w")
        except FileExistsError:  # another recording's journal, alive
            raise busy from None
        except OSError as exc:
            raise TraceWriteError("cannot write a trace to %s: %s; choose a writable path"
                                  % (self.path, exc.strerror or exc)) from None

    @property
    def max_pending_bytes(self) -> int:
        return self._sink.max_pending_bytes

    @property
    def stored_bytes(self) -> int:
        """The bytes of the values written into the golden so far (compressed; HDF5's own bytes
        besides, about 500 a value, are not counted): what a size budget watches."""
        return self._sink.stored_bytes

    @property
    def stored_values(self) -> int:
        return self._sink.stored_values

    @property
    def peak_pending_bytes(self) -> int:
        """The most bytes handed over and not yet written at any time (see max_pending_bytes)."""
        return self._sink.peak_pending_bytes

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
        self._inline_bytes = 0
        self._digests = []
        self._bases.begin_step(self._step)
        return self._step

    def add(self, kind: "str | Kind", name: str, value: Any, copy: bool = True, digest: bool = False) -> None:
        """Record `value` (an array, scalar, or nested dict/list/tuple of them) as kind/name.

        With copy=False the arrays are referenced, not copied: pass it only for
        arrays nobody will modify afterwards (fresh `Session.run` results). With digest=True a
        numeric array is kept as its digest (store/digest.py; `Step.digests` reads it back),
        computed on the writer's threads; anything else is kept whole. A Digest is kept as it is
        (a digest copied from another trace).
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
        if isinstance(value, digests.Digest):
            self._add_digest(kind, name, value)
            return
        if digest and digests.digestible(value):
            self._add_digest(kind, name, np.array(value) if copy else value)
            return
        spec, raw_leaves = structures.flatten(value, where)
        leaves = [values.make_leaf(v, where) for v in raw_leaves]
        if kind in LIGHT_KINDS and self._step != INITIAL_STEP:  # read at every step: kept in its block of steps
            for leaf in leaves:
                if self._inline_bytes + leaf.nbytes <= STEP_INLINE_BYTES:
                    leaf.plain_max = values.LIGHT_PLAIN_MAX_BYTES
                    self._inline_bytes += leaf.nbytes if leaf.layout == values.PLAIN else 0
        if copy:
            for leaf in leaves:
                if isinstance(leaf.array, np.ndarray):
                    leaf.array = leaf.array.copy()
        bases = self._bases.choose(kind, key, leaves)
        nbytes = sum(leaf.nbytes for leaf in leaves)
        self._sink.reserve(nbytes)
        self._check_open()
        future = self._pool.submit(encode_leaves, leaves, bases, self.level)
        record = ValueRecord(self._attempt, self._step, kind, name, spec)
        self._step_keys.add(key)
        self._sink.put(Value(record, future, nbytes))

    def _add_digest(self, kind: str, name: str, array: Any) -> None:
        """Keep `array`'s digest (made on the pool), or a Digest as it is."""
        if isinstance(array, digests.Digest):
            future: "concurrent.futures.Future[digests.Digest]" = concurrent.futures.Future()
            future.set_result(array)
            shape, dtype = array.shape, array.dtype
        else:
            nbytes = int(array.nbytes)
            self._sink.reserve(nbytes)  # released once the digest is computed: the array is dropped then
            self._check_open()
            future = self._pool.submit(digests.recorded, array)
            future.add_done_callback(lambda _: self._sink.release(nbytes))
            shape, dtype = tuple(int(d) for d in array.shape), array.dtype.name
        self._step_keys.add(make_key(kind, name))
        self._digests.append((kind, name, shape, dtype, future))

    def _put_digests(self) -> None:
        """The open step's digests, as one value after its tensors."""
        pending, self._digests = self._digests, []
        future = self._pool.submit(encode_digests, pending, self.level, "%s, %s" % (self.path, step_label(self._step)))
        record = ValueRecord(self._attempt, self._step, DIGESTS_KIND, DIGESTS_NAME, None)
        self._sink.put(Value(record, future, 0, tuple(described[:4] for described in pending)))

    def end_step(self, info: Optional[Mapping[str, Any]] = None) -> int:
        """Commit the open step; returns its index. Blocks until the step before it is committed
        (with steps_in_flight=N, the step N before it)."""
        self._check_open()
        if self._step is None:
            raise UsageError("%s: end_step() without begin_step()" % self.path)
        step = self._step
        full_info = dict(self._info)
        full_info.update(info or {})
        count = len(self._step_keys) - len(self._digests)
        if self._digests:
            self._put_digests()
            count += 1
        self._sink.put(Commit(StepRecord(self._attempt, step, full_info, count)))
        self._bases.commit()
        self._step = None
        if step == INITIAL_STEP:
            self._has_initial = True
        else:
            self.steps += 1
        self._commits_sent += 1
        self._wait(lambda: self._sink.commits_written >= self._commits_sent - self.steps_in_flight)
        return step

    def abort_step(self) -> None:
        """Drop the open step: what was added to it is never committed."""
        if self._step is not None:
            self._sink.put(Drop(self._step))
        self._step = None
        self._step_keys = set()
        self._digests = []
        self._bases.begin_step(None)

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
        self._sink.put(Meta(MetaRecord(dict(meta))))

    def flush(self) -> None:
        """Block until everything committed so far is in the journal and the golden."""
        self._check_open()
        self._sink.put(Flush())
        self._wait(lambda: self._sink.commits_written >= self._commits_sent and self._sink.drained())

    def close(self) -> str:
        """Finish: an open step is dropped, the golden is completed. Returns the path. If another
        recording's golden was put at the path after this writer started, that one stays and this
        one is kept beside it (TraceWriteError names where)."""
        if self.closed:
            return self.path
        self.closed = True
        _open_writers.discard(self)
        self.abort_step()
        self._sink.stop()
        self._pool.shutdown(wait=True)
        error = self._sink.failure()
        if error is not None:
            self._sink.abandon()
            raise write_error(self.path, error)
        try:
            where = self._sink.finish(self.steps, self._found)
        except OSError as exc:
            raise write_error(self.path, exc)
        trust(where)  # written whole by this process: reading it back needs no screening
        if where != self.path:
            raise TraceWriteError("another golden was put at %s while this recording ran: it stays in place, and "
                                  "this recording is kept at %s; compare the two (tracekit diff) and move the one "
                                  "you want to %s" % (self.path, where, self.path))
        return self.path

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- waiting -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise UsageError("%s: the writer is closed" % self.path)
        error = self._sink.failure()
        if error is not None:
            self.close_after_error()
            raise write_error(self.path, error)

    def close_after_error(self) -> None:
        """Stop after a failed write: the journal keeps what was committed (tracekit recover)."""
        if self.closed:
            return
        self.closed = True
        _open_writers.discard(self)
        self._sink.stop()
        self._pool.shutdown(wait=True)
        self._sink.abandon()

    def _wait(self, ready: Callable[[], bool]) -> None:
        self._sink.wait(ready)
        self._check_open()


def _with_environment(meta: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The caller's metadata, with the environment fingerprint unless it brings its own."""
    out = dict(meta or {})
    if "environment" not in out:
        from ..environment import fingerprint

        out["environment"] = fingerprint()
    return out


def create(path: str, mode: str = "w", meta: Optional[Mapping[str, Any]] = None, **options: Any) -> TraceWriter:
    """Start writing a trace at `path` ('w' overwrites, 'w-'/'x' refuses an existing file).
    A recording to the path that is running refuses it (TraceWriteError); 'w' replaces only the
    golden that was there when this writer started (see TraceWriter.close)."""
    return TraceWriter(path, mode=mode, meta=meta, **options)
