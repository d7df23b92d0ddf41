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

from ..errors import ReplayError, UsageError
from ..keys import LIGHT_KINDS, make_key, split_key
from ..store import Trace, create, open_trace

# Steps a replay's writer may lag behind it (TraceWriter(steps_in_flight=)): encoding runs beside
# the port's steps; a replay can be run again, so a crash losing these costs nothing.
STEPS_IN_FLIGHT = 8

# (step index, feeds, the golden step's info) -> what the port's step returned
StepCall = Callable[[int, Dict[str, Any], Dict[str, Any]], Dict[str, Any]]


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

    def step(self, index: int, draws: List[Tuple[str, np.ndarray]], first: bool,
             full: bool = True) -> ContextManager[Captured]:
        """Step `index` runs inside; `draws` are the golden's recorded random draws; `first`: the
        first step of its kind (the train ops it runs), where a port may create variables;
        `full`: capture everything (else only the LIGHT_KINDS: loss, learning rate, draws)."""

    def check_step(self, index: int, updated: Sequence[str]) -> None:
        """After the step: raise if it did not use the draws as it must, or left the golden's
        optimizer state of `updated` (the variables the golden's step has gradients for) unpaired."""

    def meta(self) -> Dict[str, Any]:
        """What the replay learned on the way (the strategy it ran under, ...), for the trace's
        replay metadata; asked after the last step."""


def step_for(steps: "Callable[..., Any] | Mapping[str, Callable[..., Any]]", info: Mapping[str, Any], index: int,
             golden: str) -> Callable[..., Any]:
    """The port's step function for golden step `index`: `steps` itself, or, for a golden of
    alternating train ops (a GAN's discriminator and generator steps), the function `steps`
    maps that step's train op to (a key "a+b" for a run of both)."""
    if callable(steps):
        return steps
    ran = info.get("train_ops")
    if ran is None:
        raise ReplayError("%s, step %d: the golden does not say which train op the step ran (recorded by an older "
                          "tracekit); re-record it to replay with a step function per train op" % (golden, index))
    chosen = steps.get("+".join(ran))
    if chosen is None:
        found = {id(steps[op]): steps[op] for op in ran if op in steps}
        chosen = next(iter(found.values())) if len(found) == 1 else None
    if chosen is None:
        raise ReplayError("%s, step %d ran train op %s; the step functions given are for %s (tracekit show lists "
                          "the golden's train_ops)" % (golden, index, "+".join(ran) or "(none)",
                                                       ", ".join(sorted(steps)) or "nothing"))
    return chosen


def check_steps(steps: Any) -> None:
    if callable(steps):
        return
    if not isinstance(steps, Mapping) or not steps or not all(callable(f) for f in steps.values()):
        raise UsageError("the step must be a function, or a dict {train op name: function} for a golden of "
                         "alternating train ops; got %r" % (steps,))


def replay_steps(golden: Trace, runner: Runner, call: StepCall,
                 steps: Optional[int] = None, out: Optional[str] = None, about: Optional[Dict[str, Any]] = None,
                 progress: Optional[Callable[[int, int], None]] = None,
                 meta: Optional[Dict[str, Any]] = None, every: int = 1) -> Trace:
    """Replay `steps` steps (all by default) of `golden`; returns the actual trace, opened.
    `about` describes the replay; it goes into the trace's metadata under "replay";
    `meta` is more metadata (the framework's environment, under its own key). With every=K
    only every K-th step (0, K, 2K, ...) is captured in full, as the recorder's every=K: the
    other steps keep their inputs, random draws, loss and learning rate."""
    count = len(golden) if steps is None else min(int(steps), len(golden))
    every = check_every(every)
    if out is not None:
        return _replay(golden, runner, call, count, out, about, progress, meta, limited=steps is not None,
                       every=every)
    # No place given: a temporary trace, removed when the caller closes or drops it (or at exit).
    directory = tempfile.mkdtemp(prefix="tracekit-replay-")
    try:
        trace = _replay(golden, runner, call, count, os.path.join(directory, "actual.h5"), about, progress, meta,
                        limited=steps is not None, every=every)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    trace.delete_when_closed(directory)
    return trace


def check_every(every: Any) -> int:
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise UsageError("every must be an integer >= 1 (capture every K-th step in full), got %r" % (every,))
    return every


def _replay(golden: Trace, runner: Runner, call: StepCall, count: int, path: str,
            about: Optional[Dict[str, Any]], progress: Optional[Callable[[int, int], None]],
            meta: Optional[Dict[str, Any]], limited: bool, every: int) -> Trace:
    with create(path, meta=meta, steps_in_flight=STEPS_IN_FLIGHT) as writer:
        with writer.initial():
            for key, value in runner.read_state():
                writer.add(*split_key(key), value=value, copy=False)
        kinds = set()  # the kinds of steps run so far
        for index in range(count):
            g_step = golden.step(index)
            feeds = {name: g_step["input", name] for name in g_step.names("input")}
            draws = [(name, g_step["random", name]) for name in g_step.names("random")]
            regularization = runner.regularization()  # before the update, as TF1 computed it
            kind = "+".join(g_step.info.get("train_ops") or [])
            full = index % every == 0
            with runner.step(index, draws, kind not in kinds, full) as capture:
                returned = call(index, feeds, g_step.info)
            runner.check_step(index, g_step.names("grad"))
            kinds.add(kind)
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
                if full:
                    values.update(runner.read_state())
                for key, value in values.items():
                    kind_name = split_key(key)
                    if full or kind_name[0] in LIGHT_KINDS:
                        writer.add(*kind_name, value=value, copy=False)
            if progress is not None:
                progress(index + 1, count)
        not_replayed = dict(runner.not_replayed)  # complete now: slots are mapped at the first update
        for name in golden.meta.get("regularization_losses") or []:
            not_replayed[make_key("loss", name)] = "TF1 regularization term, compared as their sum loss/regularization"
        writer.update_meta({"replay": dict(about or {}, not_replayed=not_replayed, steps=count,
                                           limited=limited, every=every, **runner.meta())})
    return open_trace(path)
