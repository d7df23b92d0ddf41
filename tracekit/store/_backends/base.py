"""What a trace reader needs from a file, and the decoding both file kinds share.

A backend (finished HDF5 golden, or an unfinished journal) lists steps and the
values in them and hands out leaf references; decoding a leaf (chunks, XOR-delta,
checksum) is the same for both and lives here. Every failure to read becomes a
CorruptTrace naming the file, the step and the tensor.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import numpy as np

from ...errors import CorruptTrace, TracekitError, UnsupportedValue
from ...keys import INITIAL_STEP, make_key, step_label
from .. import _codec, structures, values
from .._format import STORED_ORDER
from .._wire import LeafDescriptor
from ..catalog import TensorInfo


# What decoding returns for a leaf's checksum when every chunk was a zstd frame that checked its
# own content (XXH64) as it decoded: the bytes need no crc32 (tracekit verify computes it anyway).
FRAMES_CHECKED = -1


@functools.lru_cache(maxsize=None)
def memory_bytes() -> int:
    """This machine's physical memory (a huge number where it cannot be told); asked once."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover  # Windows
        return 1 << 62


@dataclass(frozen=True)
class LeafRef:
    """One stored leaf: its descriptor, and `loc`, the backend's own locator of its bytes."""

    desc: LeafDescriptor
    loc: Any


def where(path: str, step: int, key: str) -> str:
    return "%s: %s, %s" % (path, step_label(step), key)


@contextlib.contextmanager
def reading(label: str) -> Iterator[None]:
    """Any failure inside but our own errors means the file is damaged: h5py reports damaged
    metadata as KeyError, OSError, RuntimeError, ... depending on where it notices."""
    try:
        yield
    except TracekitError:
        raise
    except Exception as exc:
        raise CorruptTrace("%s: cannot be read (%s); the file is damaged: restore it or "
                           "record it again" % (label, short(exc))) from None


def short(exc: BaseException, limit: int = 300, typed: bool = True) -> str:
    """"Type: message" (or the message alone), cut to `limit` characters: what a damaged
    file makes a library say may quote kilobytes of it."""
    text = "%s: %s" % (type(exc).__name__, exc) if typed else str(exc)
    return text if len(text) <= limit else text[:limit] + "... (%d characters)" % len(text)


@dataclass
class Header:
    """What a trace says about itself; a backend fills it when it opens the file."""

    path: str
    format_version: int = 0
    producer: str = "?"
    created: str = "?"
    complete: bool = True
    recovered: bool = False
    problem: Optional[str] = None  # why an unfinished trace is unfinished
    writing: bool = False  # unfinished because its writer is recording it now
    meta_checked: bool = True  # its metadata carries a checksum (goldens written before it did not)
    meta: Dict[str, Any] = field(default_factory=dict)
    catalog: List[TensorInfo] = field(default_factory=list)
    nsteps: int = 0
    has_initial: bool = False


class Backend(abc.ABC):
    """Base of the two file kinds: subclasses fill `header` and implement the abstract methods."""

    def __init__(self, path: str) -> None:
        self.header = Header(path)
        self._cache: Dict[Tuple[str, str, int], Tuple[int, Any]] = {}  # last decoded leaf
        self._stored: Optional[Set[Tuple[str, str]]] = None  # the tensors some step stores whole
        self._order: Optional[Dict[Tuple[str, str], int]] = None
        self.thorough = False  # compute every leaf's crc32, frames that checked themselves included (verify)

    @property
    def path(self) -> str:
        return self.header.path

    # -- to implement ------------------------------------------------------------------------
    @abc.abstractmethod
    def _info(self, step: int) -> Dict[str, Any]:
        """The step's info map."""

    @abc.abstractmethod
    def _keys(self, step: int) -> List[Tuple[str, str]]:
        """(kind, name) of the step's values, in any order."""

    @abc.abstractmethod
    def entry(self, step: int, kind: str, name: str) -> Tuple[Optional[list], List[LeafRef]]:
        """(structure spec or None, leaf references) of a value the step holds."""

    @abc.abstractmethod
    def chunks(self, ref: LeafRef) -> Iterator[Tuple[Tuple[int, ...], int, bytes]]:
        """(offset, filter mask, payload) of each chunk of a chunked leaf."""

    @abc.abstractmethod
    def plain(self, ref: LeafRef) -> np.ndarray:
        """The storage array of a plain leaf."""

    def stored_chunks(self, ref: LeafRef) -> Optional[int]:
        """How many chunks a chunked leaf has in the file (None: cannot tell without reading them)."""
        return None

    def fallback(self, ref: LeafRef) -> Optional[np.ndarray]:
        """A whole chunked leaf read another way (re-packed files), or None to decode chunks."""
        return None

    def refresh(self) -> None:
        """Let go of what the file library keeps per object read so far (see Trace.refresh)."""

    def cross_check(self, step: int) -> List[str]:
        """Disagreements between two records of the step the file keeps (verify), if it keeps two."""
        return []

    def close(self) -> None:
        pass

    # -- shared --------------------------------------------------------------------------------
    def info(self, step: int) -> Dict[str, Any]:
        with reading(where(self.path, step, "step info")):
            return self._info(step)

    def keys(self, step: int) -> List[Tuple[str, str]]:
        """The step's (kind, name) pairs: kinds in data-flow order, then catalog (recording) order."""
        label = where(self.path, step, "list of tensors")
        with reading(label):
            found = self._keys(step)
        unknown = sorted({kind for kind, _ in found if kind not in STORED_ORDER})
        if unknown:
            raise CorruptTrace("%s: unknown kinds %s; the file is damaged or not written by tracekit"
                               % (label, ", ".join(unknown)))
        if self._order is None:
            self._order = {(t.kind, t.name): i for i, t in enumerate(self.header.catalog)}
        order, last = self._order, len(self._order)
        return sorted(found, key=lambda kn: (STORED_ORDER[kn[0]], order.get(kn, last), kn[1]))

    def value(self, step: int, kind: str, name: str) -> Any:
        """The value of a key that `keys(step)` listed."""
        label = where(self.path, step, make_key(kind, name))
        with reading(label):
            spec, refs = self.entry(step, kind, name)
        out = [self._restore(label, self.storage(step, kind, name, i, ref), ref.desc) for i, ref in enumerate(refs)]
        with reading(label):
            return structures.unflatten(spec, out)

    def _restore(self, label: str, storage: np.ndarray, desc: LeafDescriptor) -> Any:
        try:
            with reading(label):
                return values.restore_leaf(storage, desc.caller_shape, desc.logical, desc.form)
        except UnsupportedValue as exc:  # a dtype this environment lacks (bfloat16 without ml_dtypes)
            raise UnsupportedValue("%s: %s" % (label, exc)) from None

    def storage(self, step: int, kind: str, name: str, leaf: int, ref: LeafRef) -> np.ndarray:
        """The verified storage array of one leaf."""
        cached = self._cache.get((kind, name, leaf))
        if cached is not None and cached[0] == step:
            return cached[1]
        label = where(self.path, step, make_key(kind, name))
        with reading(label):  # the checksum too: a damaged file may declare a dtype it cannot sum
            data, crc = self._decode(step, kind, name, leaf, ref)
            if crc is None:
                crc = values.checksum(data)
        if crc != ref.desc.crc and crc != FRAMES_CHECKED:
            raise CorruptTrace("%s: checksum mismatch (stored %08x, data %08x); the file is damaged: "
                               "restore it or record it again" % (label, ref.desc.crc, crc))
        if ref.desc.layout == values.CHUNKED and self._based_on(kind, name):
            self._cache[(kind, name, leaf)] = (step, data)
        return data

    def _based_on(self, kind: str, name: str) -> bool:
        """Whether a step may store this tensor as a delta against a value read of it: only if some
        step stores it whole. A digest golden's variables and slots are whole in its initial state
        alone: kept, they would hold a whole training state for as long as the trace is open. (A
        catalog read before a recording's later steps says too little: a miss decodes the chain.)"""
        if self._stored is None:
            self._stored = {(t.kind, t.name) for t in self.header.catalog if t.steps}
        return (kind, name) in self._stored

    def _decode(self, step: int, kind: str, name: str, leaf: int, ref: LeafRef) -> Tuple[np.ndarray, Optional[int]]:
        """The leaf's storage array, and its checksum when decoding computed it on the way."""
        desc = ref.desc
        if desc.layout == values.PLAIN:
            return self.plain(ref), None
        dtype = desc.numpy_dtype
        self.declared_chunks(ref)
        base = None
        if desc.delta_base is not None:
            if desc.delta_base >= step or desc.delta_base < INITIAL_STEP:
                raise ValueError("delta base step %d is not before step %d" % (desc.delta_base, step))
            _, base_refs = self.entry(desc.delta_base, kind, name)
            base = self.storage(desc.delta_base, kind, name, leaf, base_refs[leaf])
            if base.shape != desc.shape or base.dtype != dtype:
                raise ValueError("delta base at step %d has another shape or dtype" % desc.delta_base)
        problem: Optional[Exception] = None
        try:
            out, crc = self._chunked(ref, dtype, base)
            if crc is None:
                crc = values.checksum(out)
            if crc == desc.crc or crc == FRAMES_CHECKED:
                return out, crc
        except Exception as exc:  # noqa: BLE001  # maybe not the file's own chunks: see below
            problem = exc
        # A golden re-packed by other HDF5 tools may hold other filters (or none): HDF5 decodes those.
        # Asked only now: a file's own chunks never need it, and the question costs a tenth of a read.
        try:
            whole = self.fallback(ref)
        except Exception:  # noqa: BLE001  # damaged: the first problem is the news
            whole = None
        if whole is None:
            if problem is not None:
                try:
                    raise problem
                finally:  # no cycle (this frame -> problem -> its traceback -> this frame) keeps the file's
                    problem = None  # HDF5 objects alive until a garbage collection at some later HDF5 call
            return out, crc  # a checksum mismatch, which the caller reports
        if base is not None:
            whole = np.bitwise_xor(_codec.bits(whole), _codec.bits(base)).view(dtype)
        return whole, None

    def declared_chunks(self, ref: LeafRef) -> int:
        """How many chunks a chunked leaf has, once what the file declares of it is checked before
        anything is allocated or read: a damaged or hostile shape fails here (ValueError), it does
        not ask for terabytes."""
        desc = ref.desc
        nbytes = desc.numpy_dtype.itemsize * int(np.prod(desc.shape, dtype=np.float64))
        if nbytes > memory_bytes() // 2:
            raise ValueError("it declares a %.1f GiB value (shape %s), more than half this machine's memory"
                             % (nbytes / (1 << 30), desc.shape))
        expected = _codec.chunk_count(desc.shape, desc.chunk or ())
        stored = self.stored_chunks(ref)
        if stored is not None and stored != expected:
            raise ValueError("%d of %d chunks present" % (stored, expected))
        return expected

    def _chunked(self, ref: LeafRef, dtype: np.dtype, base: Optional[np.ndarray]) -> Tuple[np.ndarray, Optional[int]]:
        """The leaf decoded from its chunks by tracekit's codec, and its checksum when computed on
        the way (FRAMES_CHECKED: every chunk is a zstd frame that checked its own bytes)."""
        desc = ref.desc
        assert desc.chunk is not None  # LeafDescriptor checks it for chunked leaves
        out = np.empty(desc.shape, dtype=dtype)
        flat, base_flat = out.reshape(-1), None if base is None else base.reshape(-1)
        seen = 0
        crc: Optional[int] = 0  # running over the runs while they come in order, else computed after
        done = 0  # elements decoded in order so far
        framed = not self.thorough  # every chunk so far checked by zstd: no crc32 needed
        for offset, mask, payload in self.chunks(ref):
            framed = framed and _codec.frame_checked(payload, mask)
            span = _codec.chunk_span(desc.shape, desc.chunk, offset)
            if span is None:  # chunks other tools laid out: decode, then copy the region over
                _codec.place(out, offset, _codec.decode_chunk(payload, mask, desc.chunk, dtype), base)
                crc = None
            else:
                start, count = span
                run = slice(start, start + count)
                running = crc is not None and start == done and not framed  # crc32 while it runs in order
                crc = _codec.decode_into(flat[run], payload, mask, desc.chunk,
                                         None if base_flat is None else base_flat[run], crc if running else None)
                done = start + count
            seen += 1
        expected = _codec.chunk_count(desc.shape, desc.chunk)
        if seen != expected:  # a backend that could not count them before
            raise ValueError("%d of %d chunks present" % (seen, expected))
        if framed:
            return out, FRAMES_CHECKED
        return out, crc if done == out.size else None
