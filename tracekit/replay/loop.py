"""The replay loop, framework-neutral: drive a runner through the golden's steps and write
what it produces as a trace with the golden's kinds and names.

A runner (tracekit/tf2/tf2_runner.py for TensorFlow 2; any object with the Runner protocol's
methods, such as a strategy-aware runner) maps and loads variables, runs one step
with the recorded inputs and random draws, and reads the state after it; this loop
does the bookkeeping around it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Collection, ContextManager, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

import numpy as np

from ..errors import ReplayError, UsageError
from ..keys import LIGHT_KINDS, REGULARIZATION, REGULARIZATION_LOSSES, REPLAY, Kind, counters_read, make_key, split_key
from ..store import Trace, TraceWriter, create, open_trace
from ..store.digest import Digest, digest, digestible
from ..store.meta import ReplayMeta
from .ahead import ReadAhead
from .forcing import forced_record
from .micro import micro_batches, restacked
from .options import ReplayOptions
from .returned import check_returned

# Steps a replay's writer may lag behind it (TraceWriter(steps_in_flight=)): encoding runs beside
# the port's steps; a replay can be run again, so a crash losing these costs nothing.
STEPS_IN_FLIGHT = 8
SAMPLED_LIGHT_KINDS = frozenset({Kind.LOSS.value, Kind.LR.value})  # replay_steps(full_at=...)

# (step index, feeds, the golden step's info) -> what the port's step returned
StepCall = Callable[[int, Dict[str, Any], Dict[str, Any]], Dict[str, Any]]


class Captured(Protocol):
    """What a step produced besides its return value."""

    values: Mapping[str, np.ndarray]  # "kind/name" -> value, as intercepted (gradients, lr, taps)
    draws: Sequence[np.ndarray]  # the random draws the step made, in order


class Runner(Protocol):
    """What the loop needs of a framework."""

    not_replayed: Dict[str, str]  # "kind/name" -> why the replay cannot produce it

    def read_state(self, digested: Collection[str] = ()) -> List[Tuple[str, Any]]:
        """("kind/name", value) of the state (variables, slots, step counter) now; of the keys in
        `digested`, those it can as a Digest made where the value is (the golden keeps only
        their digests at this step)."""

    def regularization(self) -> Optional[np.ndarray]:
        """The sum of the model's regularization losses, or None; asked before each step."""

    def step(self, index: int, draws: List[Tuple[str, np.ndarray]], first: bool, full: bool = True,
             counters: Mapping[str, int] = {}, digested: Collection[str] = ()) -> ContextManager[Captured]:
        """Step `index` runs inside; `draws` are the golden's recorded random draws; `first`: the
        first step of its kind (the train ops it runs), where a port may create variables;
        `full`: capture everything (else only the LIGHT_KINDS: loss, learning rate, draws);
        `counters`: {golden step counter: offset}, how far past its value TF1's racy rate read
        it in this step (record/counter_reads.py): the port's schedule takes it (counters.py);
        `digested`: the keys whose digest alone the golden keeps at this step, which the runner
        may capture as a Digest made where the value is."""

    def own_initial(self) -> Dict[str, np.ndarray]:
        """After the first step, asked once: the port's own initial optimizer state that the golden's replaced
        when its optimizer made it ("slot/<golden name>" -> value, in the golden's convention).
        It is the replay's initial state of those slots, so a port whose optimizer would start
        elsewhere (an Adagrad accumulator of 0.0 where TF1's was 0.1) differs there."""

    def check_step(self, index: int, updated: Sequence[str]) -> None:
        """After the step: raise if it did not use the draws as it must, or left the golden's
        optimizer state of `updated` (the variables the golden's step has gradients for) unpaired."""

    def force_state(self, state: Mapping[str, np.ndarray], rates: Mapping[str, float]) -> List[str]:
        """Set the port's variables, optimizer slots and step counter to `state` ("kind/name" ->
        the golden's value); `rates`: the golden's learning rates of the step that left it.
        Returns the keys it set."""

    def port_scales(self, state: Mapping[str, np.ndarray]) -> Dict[str, float]:
        """The largest magnitude each key of `state` takes as the port holds it, where larger than
        the golden's (a conversion's offset: what a forced value's read-back round-off is
        relative to); asked at the first forced step."""

    def force_taps(self, taps: Mapping[str, np.ndarray]) -> None:
        """From the next step on, each tracekit.tap(name, x) hands the rest of the forward pass
        `taps[name]` (the golden's value in this step) instead of x; gradients still flow to x."""

    def after_step(self, index: int) -> None:
        """After step `index` was read: a replay perturbed at every step moves its state again."""

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


class Sink(Protocol):
    """What a replay hands each step's values to, as the port produces them: the actual
    trace's writer, or a comparison fed as it goes (comparison.comparer.Comparer). The mappings
    are new each step and never changed after: a sink may keep them."""

    takes_initial: bool  # whether it wants the initial state (else the replay does not read it for it)

    def initial(self, values: Mapping[str, Any]) -> None:
        """The state before the first step, "kind/name" -> value."""

    def step(self, index: int, values: Mapping[str, Any], reasons: Mapping[str, str],
             fed: Mapping[str, Any]) -> None:
        """Golden step `index` replayed: its values; `reasons`, what the replay cannot produce -> why;
        `fed`, the golden's own values the replay fed the port (its inputs, as read from the golden)."""


@dataclass
class Replayed:
    """What a replay ran: its metadata (the caller's, and "replay"; a written trace's holds what
    the writer adds, such as the environment when the caller gave none) and steps."""

    meta: Dict[str, Any]
    steps: int
    trace: Optional[Trace] = None  # the actual trace, opened, when one was written


def replay_steps(golden: Trace, runner: Runner, call: StepCall, options: ReplayOptions = ReplayOptions(),
                 out: Optional[str] = None, about: Optional[Dict[str, Any]] = None,
                 meta: Optional[Dict[str, Any]] = None, write: bool = True, sink: Optional[Sink] = None,
                 stop: Optional[Callable[[], bool]] = None, restart_at: "frozenset[int]" = frozenset(),
                 full_at: Optional[Callable[[int], bool]] = None) -> Replayed:
    """Replay the golden's steps (options.steps of them, all by default). `about` describes the
    replay; it goes into the actual trace's metadata under "replay"; `meta` is more metadata (the
    framework's environment, under its own key). With options.every=K only every K-th step (0,
    K, 2K, ...) is captured in full, as the recorder's every=K: the other steps keep their
    inputs, random draws, loss and learning rate. The actual trace is written at `out` (by
    default a temporary file, removed when the caller closes or drops it) unless write=False;
    `sink` also gets every step's values; `stop()`, asked after each step, ends the replay
    early. options.forcing="state" starts every step after the first from the golden's state at
    the end of the step before (teacher forcing: each step's error is then its own); "taps"
    also hands the rest of each step the golden's value at every tap (each tap's error is then
    its layers' own); `restart_at` forces the golden's state at those steps only (the drift
    view's restarts after a discontinuity, tf2/verdict.py); `full_at(index)`, where given, says
    which steps are captured in full instead of options.every, the others keeping only their loss
    and learning rate (the drift view's sampled runs); captured in full, a step's tensors are
    digests where the golden keeps only a digest, unless `full_at` is Whole.
    options.progress(done, total) after each step."""
    steps, every = options.steps, options.every
    count = len(golden) if steps is None else min(int(steps), len(golden))
    meta = dict(meta or {})
    about = dict(about or {}, forcing=options.forcing)
    if restart_at:
        about["restarted_at"] = sorted(restart_at)
    def drive(sinks: List[Sink]) -> int:
        driven = _Drive(golden, runner, call, options, sinks, full_at)
        ran = driven.run(count, stop, restart_at)
        if driven.forced is not None:
            about["forced"] = driven.forced
        return ran
    if not write:
        ran = drive([sink] if sink is not None else [])
        return Replayed(dict(meta, **_replay_meta(golden, runner, about, ran, count, steps is not None, every)), ran)
    directory = None
    if out is None:  # no place given: a temporary trace, removed when the caller closes or drops it (or at exit)
        directory = tempfile.mkdtemp(prefix="tracekit-replay-")
        out = os.path.join(directory, "actual.h5")
    try:
        with create(out, meta=meta, steps_in_flight=STEPS_IN_FLIGHT) as writer:
            ran = drive([_Writing(writer, golden, isinstance(full_at, Whole))] + ([sink] if sink is not None else []))
            writer.update_meta(_replay_meta(golden, runner, about, ran, count, steps is not None, every))
        trace = open_trace(out)
    except BaseException:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    if directory is not None:
        trace.delete_when_closed(directory)
    return Replayed(trace.meta, ran, trace)


@dataclass(frozen=True)
class Whole:
    """replay_steps' full_at for steps captured whole even where the golden keeps only a digest:
    the state an arbiter starts from (tf2/verdict.py, on a golden kept as keyframes)."""

    steps: Callable[[int], bool]

    def __call__(self, index: int) -> bool:
        return self.steps(index)


class _Drive:
    """One replay's run through the steps: what the steps share (the runner, the sinks, the state
    before the first step, the kinds of steps run so far, the read-ahead)."""

    def __init__(self, golden: Trace, runner: Runner, call: StepCall, options: ReplayOptions,
                 sinks: Sequence[Sink], full_at: Optional[Callable[[int], bool]] = None) -> None:
        self.golden, self.runner, self.call, self.options, self.sinks = golden, runner, call, options, sinks
        self.full_at = full_at if full_at is not None else (lambda index: index % options.every == 0)
        # a sampled replay's other steps keep the loss and learning rate only: their inputs and draws
        # are the golden's, as fed
        self.light = SAMPLED_LIGHT_KINDS if full_at is not None else LIGHT_KINDS
        self.kinds: set = set()  # the kinds of steps run so far (the train ops of each)
        self.initial: Dict[str, Any] = {}
        self.ahead: Optional[ReadAhead] = None
        self.forced: Optional[Dict[str, Any]] = None  # what teacher forcing set, checked at its first step

    def run(self, count: int, stop: Optional[Callable[[], bool]], restart_at: "frozenset[int]") -> int:
        """Run the steps, handing each one's values to the sinks; returns how many ran."""
        golden, runner, options = self.golden, self.runner, self.options
        self.initial = dict(runner.read_state()) if any(sink.takes_initial for sink in self.sinks) else {}
        if not count:
            _send_initial(self.sinks, self.initial, runner)
        forcing = options.forcing in ("state", "taps")
        self.ahead = ahead = ReadAhead(golden, count, lambda index: index > 0 and (forcing or index in restart_at))
        try:
            for index in range(count):
                g_step, feeds, draws, info, before = ahead.take(index)
                if before is not None:  # teacher forcing: the golden's state after the step before
                    state, rates = before
                    forced = runner.force_state(state, rates)
                    if self.forced is None:
                        ahead.wait()  # forced_record reads the golden
                        self.forced = forced_record(golden, runner, index, state, forced)
                self.step(index, g_step, feeds, draws, info)
                if options.progress is not None:
                    options.progress(index + 1, count)
                runner.after_step(index)
                if stop is not None and stop():
                    return index + 1
        finally:
            ahead.close()
        return count

    def step(self, index: int, g_step: Any, feeds: Dict[str, Any], draws: List[Tuple[str, Any]],
             info: Dict[str, Any]) -> None:
        """Run one step and hand its values to the sinks, once the next step's read is done (a sink
        may refresh the golden, which no read may overlap)."""
        golden, runner, options = self.golden, self.runner, self.options
        if options.forcing == "taps":
            runner.force_taps({name: g_step["tap", name] for name in g_step.names("tap")})
        # before the update, as TF1 computed it
        regularization = runner.regularization() if REGULARIZATION in g_step else None
        kind = "+".join(info.get("train_ops") or [])
        full = self.full_at(index)
        kept = g_step.digests if full and not isinstance(self.full_at, Whole) else {}  # digests, not values
        with runner.step(index, draws, kind not in self.kinds, full, counters_read(info), kept.keys()) as capture:
            returned = self.call(index, feeds, info)
        if kind not in self.kinds:  # the first step of its kind: every "kind/name" it returns must be the golden's
            check_returned(golden, returned, index)
        runner.check_step(index, g_step.names("grad"))
        self.kinds.add(kind)
        fed = {make_key("input", name): value for name, value in feeds.items()}  # the golden's, as read
        values = dict(fed) if full or Kind.INPUT.value in self.light else {}
        names = [name for name, _ in draws]
        if full or Kind.RANDOM.value in self.light:
            taken = restacked(names, capture.draws, micro_batches(info))
            values.update((make_key("random", name), value) for name, value in taken.items())
        produced = dict(capture.values)
        produced.update(returned)  # what the step returns wins over what was intercepted
        if regularization is not None and REGULARIZATION in g_step:
            produced.setdefault(REGULARIZATION, regularization)
        if full:
            produced.update(runner.read_state(kept.keys()))
        values.update((key, value) for key, value in produced.items() if full or split_key(key)[0] in self.light)
        if full:
            _digest_where_kept(values, kept)
        assert self.ahead is not None
        self.ahead.wait()
        if index == 0:  # the optimizer made its slots in this step: now the initial state is whole
            _send_initial(self.sinks, self.initial, runner)
            self.initial = {}  # the sinks have it: a whole state is not held for the rest of the replay
        reasons = _not_replayed(golden, runner)
        for sink in self.sinks:
            sink.step(index, values, reasons, fed)


def _digest_where_kept(values: Dict[str, Any], kept: Mapping[str, Digest]) -> None:
    """Where the golden keeps only a digest at this step, the replay's value becomes its digest
    now, before a sink queues the step: a step of a big model's state then waits as digests, not
    as arrays (the comparison and the writer judge and keep digests there anyway). Its crc32 is
    made only where the sampled bytes equal the golden's, the one case a comparison reads it."""
    for key, golden in kept.items():
        value = values.get(key)
        if value is not None and not isinstance(value, Digest) and digestible(value):
            values[key] = digest(value, crc_if=golden.sample)


def _send_initial(sinks: Sequence[Sink], initial: Dict[str, Any], runner: Runner) -> None:
    """The state before the first step: the variables as read then, and the slots as the port's
    optimizer made them at its first update, before the golden's values replaced them."""
    state = dict(initial)
    state.update(runner.own_initial())  # handed over (and dropped by the runner) whether or not a sink takes it
    for sink in sinks:
        if sink.takes_initial:
            sink.initial(state)


def _not_replayed(golden: Trace, runner: Runner) -> Dict[str, str]:
    out = dict(runner.not_replayed)  # complete after the first step: slots are mapped at the first update
    for name in golden.meta.get(REGULARIZATION_LOSSES) or []:
        out[make_key("loss", name)] = "TF1 regularization term, compared as their sum %s" % REGULARIZATION
    return out


def _replay_meta(golden: Trace, runner: Runner, about: Optional[Dict[str, Any]], ran: int, count: int,
                 limited: bool, every: int) -> Dict[str, Any]:
    # limited: fewer steps asked for (steps=N) or stopped as asked (stop()): not a replay cut short
    record = ReplayMeta.made(**dict(about or {}, not_replayed=_not_replayed(golden, runner), steps=ran,
                                    limited=limited or ran < count, stopped=ran < count, every=every, **runner.meta()))
    return {REPLAY: record.to_meta()}


class _Writing:
    """The sink writing the actual trace, with the golden's kinds and names; where the golden
    keeps a tensor's digest, the replay keeps its digest too (unless `whole`: replay_steps' Whole)."""

    takes_initial = True

    def __init__(self, writer: TraceWriter, golden: Trace, whole: bool = False) -> None:
        self.writer, self.golden, self.whole = writer, golden, whole

    def initial(self, values: Mapping[str, Any]) -> None:
        with self.writer.initial():
            self._add(values)

    def step(self, index: int, values: Mapping[str, Any], reasons: Mapping[str, str],
             fed: Mapping[str, Any]) -> None:
        with self.writer.step(info={"golden_step": index}):
            self._add(values, None if self.whole else self.golden.step(index).digests)

    def _add(self, values: Mapping[str, Any], digested: Optional[Mapping[str, Any]] = None) -> None:
        for key, value in values.items():
            self.writer.add(*split_key(key), value=value, copy=False, digest=digested is not None and key in digested)
