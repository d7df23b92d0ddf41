"""Reading traces: `tracekit.open(path)` -> Trace, read-only and lazy."""

from __future__ import annotations

import collections
import contextlib
import difflib
import os
import shutil
import threading
import weakref
from typing import Any, Dict, Iterator, List, Optional, Tuple

try:
    from collections.abc import Mapping
except ImportError:  # pragma: no cover
    from collections import Mapping

import numpy as np

from ..errors import CorruptTrace, UsageError
from ..keys import (BEFORE, INITIAL_STEP, SPARSE_INDICES, SPARSE_VALUES, STATE_KINDS, Kind, make_key, split_key,
                    step_label)
from . import _metadata, digest as digests, rows, values
from ._backends import Backend
from .catalog import TensorInfo
from ._format import DIGESTS_KIND, DIGESTS_NAME, PARTIAL_SUFFIX
from .remote import is_url, refuse_url


def _remove(backend: Backend, path: str) -> None:
    backend.close()
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


STEPS_KEPT = 8  # Step objects a Trace hands out again (a replay's read-ahead to its comparison)


class Trace:
    """A recorded trace: metadata, the initial state, and steps of named tensors.

    `trace.step(k)` maps "kind/name" keys ("grad/dense/kernel:0") to values, read
    when asked for. An unfinished trace (its writer was killed) has `complete`
    False and `problem` saying why; its committed steps read as usual.
    """

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        header = backend.header
        self.path: str = header.path
        self.format_version: int = header.format_version
        self.producer: str = header.producer
        self.created: str = header.created
        self.meta: Dict[str, Any] = header.meta
        self.catalog: List[TensorInfo] = list(header.catalog)
        self.complete: bool = header.complete
        self.recovered: bool = header.recovered
        self.problem: Optional[str] = header.problem
        self.writing: bool = header.writing  # unfinished: its writer is recording it right now
        self.meta_checked: bool = header.meta_checked  # False: written before metadata checksums
        self.recording: Optional[str] = None  # a recording to this path runs or was interrupted (open_trace)
        self._cleanup: Optional[weakref.finalize] = None  # set by delete_when_closed
        # The steps asked for lately: a replay's read-ahead, its writer and its comparison each ask
        # for the step they are at, and share its list of keys and its decoded digests.
        self._steps: "collections.OrderedDict[int, Step]" = collections.OrderedDict()
        self._steps_lock = threading.Lock()

    def __len__(self) -> int:
        return self._backend.header.nsteps

    def __iter__(self) -> Iterator["Step"]:
        for k in range(len(self)):
            yield Step(self._backend, k)

    def step(self, k: int) -> "Step":
        """Step k (0-based; negative counts from the end)."""
        n = len(self)
        index = k + n if k < 0 else k
        if not 0 <= index < n:
            raise IndexError("%s has %d steps; step %d does not exist" % (self.path, n, k))
        with self._steps_lock:
            found = self._steps.get(index)
            if found is None:
                found = self._steps[index] = Step(self._backend, index)
                while len(self._steps) > STEPS_KEPT:
                    self._steps.popitem(last=False)
            return found

    @property
    def initial(self) -> "Step":
        """The state before the first step (empty if none was recorded)."""
        return Step(self._backend, INITIAL_STEP)

    @property
    def has_initial(self) -> bool:
        return self._backend.header.has_initial

    def before(self, k: int) -> Optional["Step"]:
        """What was recorded just before step k: the initial state for step 0 (None if the
        trace has none), else step k - 1 (its state is what step k started from)."""
        if k == 0:
            return self.initial if self.has_initial else None
        return self.step(k - 1)

    def state_before(self, k: int) -> Dict[str, Any]:
        """The training state step k started from ("kind/name" -> value of every variable and
        slot); a UsageError if the trace holds none there (no initial state before step 0, or
        a light step of a recording with every=K)."""
        return dict(self.state_view(k))

    def state_view(self, k: int) -> "StateView":
        """state_before(k) as a mapping that reads each value when it is looked up (a whole state
        need not be held at once to be copied, or to look at a few of its tensors)."""
        before = self.before(k)
        keys = [] if before is None else [key for key in before
                                          if split_key(key)[0] in STATE_KINDS and not key.endswith(BEFORE)]
        if not any(split_key(key)[0] == "var" for key in keys):
            raise UsageError("%s holds no variables from before step %d (%s)" % (
                self.path, k, "it has no initial state" if k == 0 else "recorded with every=K"))
        # what runs between the steps changed after step k - 1 ended: step k holds it
        step = self.step(k) if 0 <= k < len(self) else None
        changed = {} if step is None else {key[:-len(BEFORE)]: key for key in step if key.endswith(BEFORE)}
        return StateView(before, keys, step, changed)

    def names(self, kind: "str | Kind") -> List[str]:
        """Names recorded under `kind`, in data-flow then recording order. A variable's value set
        between steps ("<var>@before", state_before reads it) is no tensor of its own: not listed."""
        kind = Kind.parse(kind).value
        return [t.name for t in self.catalog if t.kind == kind and not t.name.endswith(BEFORE)]

    def info(self, kind: "str | Kind", name: Optional[str] = None) -> TensorInfo:
        """A tensor's catalog entry: info("grad", "dense/kernel:0") or info("grad/dense/kernel:0")."""
        kind, name = _kind_name(kind, name)
        for t in self.catalog:
            if t.kind == kind and t.name == name:
                return t
        raise KeyError(_missing("%s has no tensor" % self.path, make_key(kind, name),
                                [t.key for t in self.catalog]))

    def series(self, kind: "str | Kind", name: Optional[str] = None) -> "Series":
        """One tensor across all the steps that recorded it: series("loss", "loss") or
        series("loss/loss")."""
        kind, name = _kind_name(kind, name)
        self.info(kind, name)  # KeyError naming the file if unknown
        steps, vals = [], []
        for k in range(len(self)):
            step = Step(self._backend, k)
            if step.has(kind, name):
                steps.append(k)
                vals.append(step.get_value(kind, name))
        return Series(kind, name, steps, vals)

    def save(self, path: "str | os.PathLike") -> str:
        """Copy this (finished) trace to `path` (a local path; a trace at a URL is downloaded);
        returns the path."""
        if not self.complete:
            raise UsageError("%s is unfinished (%s); recover it before saving a copy" % (self.path, self.problem))
        path = os.fspath(path)
        refuse_url(path, "save a copy")
        if not is_url(self.path):
            shutil.copyfile(self.path, path)
            return path
        from .remote import open_url

        partial = path + PARTIAL_SUFFIX  # a download cut short never passes for the golden
        with open_url(self.path) as source, open(partial, "wb") as out:
            shutil.copyfileobj(source, out, 4 << 20)
        os.replace(partial, path)
        return path

    def delete_when_closed(self, directory: Optional[str] = None) -> None:
        """Make this a temporary trace: its file (or `directory`, made for it) is removed when
        the trace is closed or garbage-collected, or the process exits. save() keeps a copy."""
        self._cleanup = weakref.finalize(self, _remove, self._backend, directory or self.path)

    def refresh(self) -> None:
        """Free the memory the file library keeps for each tensor read so far: a long read (a
        comparison of many steps) calls it between steps, when no value is being read."""
        self._backend.refresh()

    def close(self) -> None:
        if self._cleanup is not None:
            self._cleanup()  # closes the backend first
        else:
            self._backend.close()

    def __enter__(self) -> "Trace":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "complete" if self.complete else "INCOMPLETE"
        return "<tracekit.Trace %s: %d steps, %s>" % (self.path, len(self), state)


class StateView(Mapping):
    """Trace.state_view's mapping: the state before a step, each value read from the step before
    (or, where a run between the steps changed it, from the step itself) when looked up."""

    def __init__(self, before: "Step", keys: List[str], step: "Optional[Step]", changed: Dict[str, str]) -> None:
        self._before, self._step, self._changed = before, step, changed
        known = set(keys)
        self._keys = keys + [key for key in changed if key not in known]
        self._known = known | set(changed)

    def __getitem__(self, key: str) -> Any:
        if key in self._changed:
            return self._step[self._changed[key]]  # type: ignore[index]
        if key not in self._known:
            raise KeyError(key)
        return self._before[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


class Step(Mapping):
    """One step's tensors, keyed "kind/name"; values are read on access. A step between the
    keyframes of a recording with digests keeps some tensors as digests instead (`digests`)."""

    def __init__(self, backend: Backend, index: int) -> None:
        self._backend = backend
        self.index = index
        self._keys: Optional[List[str]] = None
        self._key_set: "frozenset[str]" = frozenset()  # for membership: a step may hold thousands
        self._has_digests = False
        self._digests: Optional[Dict[str, digests.Digest]] = None

    @property
    def info(self) -> Dict[str, Any]:
        """What the producer noted about the step (global_step, ...)."""
        if self.index == INITIAL_STEP and not self._backend.header.has_initial:
            return {}
        return self._backend.info(self.index)

    def _key_list(self) -> List[str]:
        if self._keys is None:
            if self.index == INITIAL_STEP and not self._backend.header.has_initial:
                stored = []
            else:
                stored = self._backend.keys(self.index)
            self._keys = [make_key(k, n) for k, n in stored if k != DIGESTS_KIND]
            self._has_digests = len(self._keys) < len(stored)
            self._key_set = frozenset(self._keys)
        return self._keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._key_list())

    def __len__(self) -> int:
        return len(self._key_list())

    def __contains__(self, key: object) -> bool:
        self._key_list()
        return key in self._key_set

    def __getitem__(self, key: "str | Tuple[str, str]") -> Any:
        """step["grad/dense/kernel:0"] or step["grad", "dense/kernel:0"]."""
        kind, name = split_key(key) if isinstance(key, str) else key
        return self.get_value(kind, name)

    def has(self, kind: str, name: str) -> bool:
        return make_key(kind, name) in self

    @property
    def digests(self) -> Dict[str, digests.Digest]:
        """"kind/name" -> Digest of the tensors this step keeps as digests (none at a keyframe)."""
        if self._digests is None:
            self._key_list()
            if not self._has_digests:
                self._digests = {}
            else:
                blob = self._backend.value(self.index, DIGESTS_KIND, DIGESTS_NAME)
                where = "%s: %s, digests" % (self._backend.path, step_label(self.index))
                try:
                    entries = _metadata.unpack(np.asarray(blob, dtype=np.uint8).tobytes())
                except (TypeError, ValueError) as exc:
                    raise CorruptTrace("%s: they do not decode (%s)" % (where, exc)) from None
                self._digests = digests.unpack(entries, values.logical_dtype, where)
        return self._digests

    def names(self, kind: "str | Kind") -> List[str]:
        kind = Kind.parse(kind).value
        prefix = kind + "/"
        return [k[len(prefix):] for k in self._key_list() if k.startswith(prefix)]

    def gradient(self, var: str, shape: Optional[Tuple[int, ...]] = None) -> np.ndarray:
        """The gradient of `var` in the variable's shape: as recorded, or, where the step keeps it
        as the rows an update consumed (grad/<var>/values and /indices: an embedding's), those rows
        added up by index into zeros of `shape` (default: the variable's, as this step holds it)."""
        if self.has("grad", var):
            return np.asarray(self.get_value("grad", var))
        values, indices = (np.asarray(self.get_value("grad", var + part)) for part in (SPARSE_VALUES, SPARSE_INDICES))
        if shape is None:
            if not self.has("var", var):
                raise UsageError("%s: %s keeps the gradient of %s as rows and does not hold the variable: pass its "
                                 "shape" % (self._backend.path, step_label(self.index), var))
            shape = np.shape(self.get_value("var", var))
        return rows.dense(values, indices, tuple(shape))

    def get_value(self, kind: str, name: str) -> Any:
        if not self.has(kind, name):
            raise KeyError(_missing("%s: %s has no" % (self._backend.path, step_label(self.index)),
                                    make_key(kind, name), self._key_list()))
        return self._backend.value(self.index, kind, name)

    def __repr__(self) -> str:
        label = "initial" if self.index == INITIAL_STEP else str(self.index)
        digested = " and digests" if self._key_list() and self._has_digests else ""
        return "<tracekit.Step %s: %d tensors%s>" % (label, len(self), digested)


def _kind_name(kind: "str | Kind", name: Optional[str]) -> Tuple[str, str]:
    """(kind, name) from either form: ("grad", "dense/kernel:0") or ("grad/dense/kernel:0", None)."""
    if name is None:
        if isinstance(kind, Kind):
            raise TypeError("give the tensor's name too, or one key like 'grad/dense/kernel:0'")
        return split_key(kind)
    return Kind.parse(kind).value, name


def _missing(what: str, key: str, keys: List[str]) -> str:
    """The KeyError message: what is missing and, if any, the keys it was probably meant to be."""
    near = [k for k in (key + ":0",) if k in keys] + difflib.get_close_matches(key, keys, n=3, cutoff=0.75)
    near = list(dict.fromkeys(near))[:3]
    return "%s %s%s" % (what, key, "; did you mean %s?" % " or ".join(near) if near else "")


class Series:
    """One tensor over steps: `steps` (indices that recorded it) and `values`."""

    def __init__(self, kind: str, name: str, steps: List[int], values: List[Any]) -> None:
        self.kind = kind
        self.name = name
        self.steps = steps
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i: int) -> Any:
        return self.values[i]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def stack(self) -> np.ndarray:
        """The values stacked on a new first axis (they must share shape and dtype)."""
        if not self.values:
            raise UsageError("%s/%s has no recorded steps to stack" % (self.kind, self.name))
        return np.stack([np.asarray(v) for v in self.values])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.stack()
        return out if dtype is None else out.astype(dtype)

    def __repr__(self) -> str:
        return "<tracekit.Series %s/%s: %d steps>" % (self.kind, self.name, len(self))
