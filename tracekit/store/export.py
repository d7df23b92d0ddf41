"""`export`: a trace as a plain numpy .npz, the escape hatch to tools without tracekit.

Keys are "<step>/<kind>/<name>" with step "initial" or "step_000012"; a leaf of a
structured value gets "#<i>" (its index in flatten order). The archive is written
member by member, so memory stays at one tensor. What numpy cannot hold without
pickle is converted: strings become fixed-width "S"/"U" arrays (numpy drops trailing
NUL bytes from "S" items when it reads them back; the golden keeps them), and dtypes without
a numpy equivalent (bfloat16, ...) are saved as their raw bits, named in the
"__dtypes__" member. "__meta__" holds the metadata as JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import zipfile
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

import numpy as np

from ..errors import TraceWriteError, TracekitError, UsageError
from ..keys import INITIAL_STEP
from .opening import open_trace
from .reader import Trace
from .remote import is_url, refuse_url
from .structures import flatten
from .values import contiguous, is_ml_dtype


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(type(obj).__name__)


def _plain(value: Any) -> Any:
    """(array numpy can save without pickle, logical dtype name if converted to bits)."""
    arr = np.asarray(value)
    if arr.dtype.kind == "O":
        items = arr.ravel().tolist()
        kind = "U" if items and isinstance(items[0], str) else "S"
        return np.array(items, dtype=kind).reshape(arr.shape), None
    if is_ml_dtype(arr.dtype):  # bfloat16 and friends
        return arr.view("u%d" % arr.dtype.itemsize), arr.dtype.name
    return arr, None


@dataclass(frozen=True)
class Exported:
    """What `export_npz` wrote: `arrays` arrays of `steps` steps (plus the initial state) to
    `path`; an unfinished trace (`complete` False, `problem` why) exports its committed steps."""

    path: str
    arrays: int
    steps: int
    complete: bool
    problem: Optional[str]


def export_npz(path: str, out: str, progress: Optional[Callable[[int, int], None]] = None) -> Exported:
    """Write every tensor of the trace at `path` to the .npz file `out`. Written under a
    temporary name and renamed when whole: a failure leaves nothing behind."""
    out = os.fspath(out)
    refuse_url(out, "write an export")
    if os.path.isdir(out):
        raise UsageError("%s is a directory: give the path of the .npz file to write" % out)
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise UsageError("cannot write %s: the directory %s does not exist" % (out, folder))
    if os.path.exists(out) and os.path.exists(path) and os.path.samefile(out, path):
        raise UsageError("%s is the trace itself: give another path for the .npz file" % out)
    tmp = out + ".partial"
    try:
        with open_trace(path) as trace:
            count = _write(trace, tmp, progress)
            done = Exported(out, count, len(trace), trace.complete, trace.problem)
        os.replace(tmp, out)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, TracekitError):
            raise TraceWriteError("cannot write %s: %s" % (out, exc.strerror or exc)) from None
        raise
    return done


def _write(trace: Trace, out: str, progress: Optional[Callable[[int, int], None]]) -> int:
    count = 0
    dtypes: Dict[str, str] = {}
    with zipfile.ZipFile(out, "w", allowZip64=True) as zf:
        def put(key: str, arr: np.ndarray) -> None:
            with zf.open(key + ".npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, contiguous(arr), allow_pickle=False)

        steps = ([trace.initial] if trace.has_initial else []) + list(trace)
        for done, step in enumerate(steps):
            label = "initial" if step.index == INITIAL_STEP else "step_%06d" % step.index
            for key in step:
                spec, leaves = flatten(step[key], key)
                for i, leaf in enumerate(leaves):
                    name = "%s/%s%s" % (label, key, "" if spec is None else "#%d" % i)
                    arr, logical = _plain(leaf)
                    if logical:
                        dtypes[name] = logical
                    put(name, arr)
                    count += 1
            if progress is not None:
                progress(done + 1, len(steps))
        source = trace.path if is_url(trace.path) else os.path.abspath(trace.path)
        meta = {"source": source, "producer": trace.producer, "created": trace.created,
                "complete": trace.complete, "meta": trace.meta,
                "catalog": [t.to_dict() for t in trace.catalog]}
        put("__meta__", np.array(json.dumps(meta, default=_jsonable)))
        put("__dtypes__", np.array(json.dumps(dtypes)))
    return count
