"""The replay loop, framework-neutral: drive a runner through the golden's steps and write
what it produces as a trace with the golden's kinds and names.

A runner (tf2_runner.py for TensorFlow 2; any object with the Runner protocol's
methods, such as a strategy-aware runner) maps and loads variables, runs one step
with the recorded inputs and random draws, and reads the state after it; this loop
does the bookkeeping around it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Callable, ContextManager, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

import numpy as np

from ..keys import make_key, split_key
from ..store import Trace, create, open_trace


class Captured(Protocol):
    """What a step produced besides its return value."""

    values: Mapping[str, np.ndarray]  # "kind/name" -> value, as intercepted (gradients, lr, taps)
    draws: Sequence[np.ndarray]  # the random draws the step made, in order


class Runner(Protocol):
    """What the loop needs of a framework."""

    not_replayed: Dict[str, str]  # "kind/name" -> why the replay cannot produce it

    def read_state(self) -> List[Tuple[str, np.ndarray]]:
        """("kind/name", value) of the state (variables, slots, step counter) now."""

    def regularization(self) -> Optional[np.ndarray]:
        """The sum of the model's regularization losses, or None; asked before each step."""

    def step(self, index: int, draws: List[Tuple[str, np.ndarray]]) -> ContextManager[Captured]:
        """Step `index` runs inside; `draws` are the golden's recorded random draws."""

    def check_tape(self, index: int) -> None:
        """After the step: raise if it did not use the draws as it must."""


def replay_steps(golden: Trace, runner: Runner, call: Callable[[Dict[str, Any]], Dict[str, Any]],
                 steps: Optional[int] = None, out: Optional[str] = None, about: Optional[Dict[str, Any]] = None,
                 progress: Optional[Callable[[int, int], None]] = None,
                 meta: Optional[Dict[str, Any]] = None) -> Trace:
    """Replay `steps` steps (all by default) of `golden`; returns the actual trace, opened.
    `about` describes the replay; it goes into the trace's metadata under "replay";
    `meta` is more metadata (the framework's environment, under its own key)."""
    count = len(golden) if steps is None else min(int(steps), len(golden))
    if out is not None:
        return _replay(golden, runner, call, count, out, about, progress, meta, limited=steps is not None)
    # No place given: a temporary trace, removed when the caller closes or drops it (or at exit).
    directory = tempfile.mkdtemp(prefix="tracekit-replay-")
    try:
        trace = _replay(golden, runner, call, count, os.path.join(directory, "actual.h5"), about, progress, meta,
                        limited=steps is not None)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    trace.delete_when_closed(directory)
    return trace


def _replay(golden: Trace, runner: Runner, call: Callable[[Dict[str, Any]], Dict[str, Any]], count: int, path: str,
            about: Optional[Dict[str, Any]], progress: Optional[Callable[[int, int], None]],
            meta: Optional[Dict[str, Any]], limited: bool) -> Trace:
    with create(path, meta=meta) as writer:
        with writer.initial():
            for key, value in runner.read_state():
                writer.add(*split_key(key), value=value, copy=False)
        for index in range(count):
            g_step = golden.step(index)
            feeds = {name: g_step["input", name] for name in g_step.names("input")}
            draws = [(name, g_step["random", name]) for name in g_step.names("random")]
            regularization = runner.regularization()  # before the update, as TF1 computed it
            with runner.step(index, draws) as capture:
                returned = call(feeds)
            runner.check_tape(index)
            with writer.step(info={"golden_step": index}):
                for name, value in feeds.items():
                    writer.add("input", name, value, copy=False)
                names = [name for name, _ in draws]
                for i, value in enumerate(capture.draws):
                    writer.add("random", names[i] if i < len(names) else "tf2-draw-%d" % i, value, copy=False)
                values = dict(capture.values)
                values.update(returned)  # what the step returns wins over what was intercepted
                if regularization is not None and "loss/regularization" in g_step:
                    values.setdefault("loss/regularization", regularization)
                for key, value in runner.read_state():
                    values[key] = value
                for key, value in values.items():
                    writer.add(*split_key(key), value=value, copy=False)
            if progress is not None:
                progress(index + 1, count)
        not_replayed = dict(runner.not_replayed)  # complete now: slots are mapped at the first update
        for name in golden.meta.get("regularization_losses") or []:
            not_replayed[make_key("loss", name)] = "TF1 regularization term, compared as their sum loss/regularization"
        writer.update_meta({"replay": dict(about or {}, not_replayed=not_replayed, steps=count,
                                           limited=limited)})
    return open_trace(path)
