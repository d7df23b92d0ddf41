"""tracekit.tf2.check: a replay compared as it runs, and the verdict on long goldens
(tf2/verdict.py) with the runs it needs."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, List, Mapping, Optional, Tuple

from ..comparison.arbiter import LONG_GOLDEN
from ..comparison.result import Comparison
from ..comparison.tolerance import Tolerance
from ..errors import StaleStep, UsageError
from ..judge.live import compared
from ..judge.variants import conversions_in, name_by_variants, one_step
from ..replay.factory import made as made_port
from ..replay.loop import Replayed
from ..replay.options import ReplayOptions
from ..report.reported import Reported
from ..report.judged import long_golden_advice
from ..keys import RECORDING, REPLAY, split_key
from ..store import Trace, open_trace
from ..store.opening import open_written
from ..store.meta import RecordingMeta, ReplayMeta
from .apart import Apart
from .drive import _LOCALIZE_SETS, _made, _replay
from .port_runs import PortRuns
from .verdict import JUDGES, judge_keyframed, judge_long


def check(golden: "str | Trace", step_fn: "Callable[..., Any] | Mapping[str, Callable[..., Any]] | None" = None, *,
          tolerance: "Tolerance | str | None" = None, fail_fast: bool = False, out: Optional[str] = None,
          make_port: Optional[Callable[[], Any]] = None, judge: str = "auto", **options: Any) -> Reported:
    """Replay and compare as the steps run: what tracekit.compare(golden, replay(golden, step_fn,
    ...), tolerance) returns, without writing the actual trace unless `out` is given (each
    step's values are compared on another thread while the port runs its next steps, then
    dropped). fail_fast=True stops the replay within a few steps of the first divergence no
    tolerance accepts (the result says where). `options` are replay()'s: model, variables,
    var_map, init, random, steps, inputs, convert, progress, strategy, ...; tolerance as
    for tracekit.compare. To keep the actual trace of a failing check for review, replay
    again with out= (the replay is deterministic for a given golden and port).

    make_port: the port's factory, as for localize (a fresh (model, step function[, options])
    per call; step_fn and model may then be left out). With it, a golden longer than
    LONG_GOLDEN steps is judged by each step's own error, the steps that fail judged by the
    float64 arbiter, and the drift from the port's own state against the spread of perturbed
    replays (tf2/verdict.py; `out` then keeps that replay, every tensor at its sampled steps);
    a golden that keeps its state whole only at keyframes (every=K, a size budget), unless a
    tolerance is given, by the drift view alone, restarted from the golden's state after each
    keyframe (verdict.judge_keyframed). judge: "auto" (those given make_port, else "plain"),
    "plain" (the replay as it runs against the tolerance) or "local"."""
    return _check(golden, step_fn, ReplayOptions.of(options, "tracekit.tf2.check"), tolerance=tolerance,
                  fail_fast=fail_fast, out=out, make_port=make_port, judge=judge)


def _check(golden: "str | Trace", step_fn: Any, options: ReplayOptions, *, tolerance: "Tolerance | str | None" = None,
           fail_fast: bool = False, out: Optional[str] = None, make_port: Optional[Callable[[], Any]] = None,
           judge: str = "auto") -> Reported:
    """check(), its replay options made."""
    if not isinstance(fail_fast, bool):
        raise UsageError("fail_fast must be True or False, got %r" % (fail_fast,))
    if judge not in JUDGES:
        raise UsageError("judge must be one of %s, got %r" % (", ".join(JUDGES), judge))
    if make_port is None and judge == "local":
        raise UsageError("tracekit.tf2.check(judge='local') needs the port's factory: pass make_port= (a fresh "
                         "(model, step function) per call)")
    if make_port is None and step_fn is None:
        raise UsageError("tracekit.tf2.check needs the port: its step function (and model=), or its factory "
                         "(make_port=)")
    with (contextlib.nullcontext(golden) if isinstance(golden, Trace) else open_trace(golden)) as trace:
        partial = _keyframed(trace)
        if judge == "local" and partial:
            raise UsageError("%s keeps the training state whole only at keyframes (%s): judge='local' replays every "
                             "step from the golden's state; judge it plain (judge='plain'), or record with every=1"
                             % (trace.path, partial))
        long = judge == "auto" and len(trace) > LONG_GOLDEN and not partial
        if make_port is not None and (judge == "local" or long and "forcing" not in options.named
                                      and options.strategy is None):
            return _judged(trace, step_fn, make_port, tolerance, out, options)  # type: ignore[return-value]
        if make_port is not None and partial and judge == "auto" and tolerance is None and \
                "forcing" not in options.named and options.strategy is None:
            runs = _port_runs(trace, step_fn, make_port, tolerance, options)
            return judge_keyframed(trace, runs, _whole_steps(trace), Reported, out)  # type: ignore[return-value]
        caller = options
        if step_fn is None:
            assert make_port is not None
            _, step_fn, options = _made(make_port, options, _LOCALIZE_SETS)
        result, replayed = _compared(trace, step_fn, options, trace, tolerance, out=out, fail_fast=fail_fast)
        _variants(result, trace, step_fn, make_port, caller, options, tolerance)
        first = result.first_divergence
        if ReplayMeta.of(replayed.meta[REPLAY]).stopped and first is not None:
            result.notes.append("fail_fast: stopped after step %d, at the first divergence (step %d)"
                                % (replayed.steps - 1, first.step))
        if make_port is None and judge == "auto" and len(trace) > LONG_GOLDEN and not result.ok and \
                not partial and result.forcing == "none":
            result.advice = long_golden_advice(len(trace))
        return result  # type: ignore[return-value]


def _variants(result: Reported, trace: Trace, step_fn: Any, make_port: Optional[Callable[[], Any]],
              caller: ReplayOptions, options: ReplayOptions, tolerance: "Tolerance | str | None") -> None:
    """The failing step replayed with the port's conversions' variants (judge/variants.py): by a
    fresh port from make_port (its conversions made alike), else by the same step function; a
    tf.function traced for the check's replay cannot run another, and the result says so."""
    def rerun(excerpt: Trace, pick: Optional[Tuple[int, int]]) -> Reported:
        fn, given = step_fn, options
        if make_port is not None:
            _, fn, given = _made(make_port, caller, _LOCALIZE_SETS)
        return _compared(excerpt, fn, ReplayOptions.of(one_step(given.given(), pick), "tracekit.tf2.check"),
                         excerpt, tolerance, fail_fast=True)[0]
    if result.ok:
        return
    try:
        name_by_variants(result, trace, conversions_in(options.given()), rerun)
    except StaleStep:
        result.notes.append("the conversions' variants (an LSTM's forget bias, its gate order) were not tried: the "
                            "step is a tf.function traced for this check; pass make_port= to have them tried")


def _whole_steps(trace: Trace) -> List[int]:
    """The steps after which a golden keeps the training state whole (its keyframes)."""
    return [step.index for step in trace if any(split_key(key)[0] == "var" for key in step)]


def _compared(trace: Trace, step_fn: Any, options: ReplayOptions, against: Trace, tolerance: "Tolerance | str | None",
              out: Optional[str] = None, fail_fast: bool = False, measuring: bool = False,
              **run: Any) -> Tuple[Reported, Replayed]:
    """Replay `trace`'s steps, each compared as it runs with `against`'s (judge/live.py; `run`:
    _replay's perturbations)."""
    def replayed(watch: Any, stop: Any) -> Replayed:
        return _replay(trace, step_fn, options, out, write=out is not None, watch=watch, stop=stop, **run)
    return compared(replayed, against, tolerance, out, fail_fast, measuring)


def _keyframed(trace: Trace) -> Optional[str]:
    """How a golden keeps its state, where not whole at every step (None: it does)."""
    if all(t.steps >= len(trace) for t in trace.catalog if t.kind == "var") or not len(trace):
        return None
    recording = RecordingMeta.of(trace.meta.get(RECORDING))
    frames = recording.keyframes or {}
    every = frames.get("every", recording.every if "every" in recording.given else None)
    return "every %d steps" % every if isinstance(every, int) else "at the initial state only"


def _judged(trace: Trace, step_fn: Any, make_port: Callable[[], Any], tolerance: "Tolerance | str | None",
            out: Optional[str], options: ReplayOptions) -> Comparison:
    """A long golden's verdict (tf2/verdict.py)."""
    if "forcing" in options.named or options.strategy is not None:
        raise UsageError("judge='local' replays teacher-forced itself and does not run under a strategy yet: leave "
                         "out forcing= and strategy=")
    return judge_long(trace, _port_runs(trace, step_fn, make_port, tolerance, options), drift_out=out)


def _port_runs(trace: Trace, step_fn: Any, make_port: Callable[[], Any], tolerance: "Tolerance | str | None",
               options: ReplayOptions) -> PortRuns:
    """The runs a long golden's verdict makes: the forced one of the port given (step_fn and
    options' model), else each of a fresh port, whose own replay options (they name its own
    objects: convert=, variables=) win over the caller's."""
    base = options.but(model=None)
    apart = Apart()

    def made() -> Tuple[Any, Any, ReplayOptions]:
        model, step, own = made_port(make_port)
        return model, step, base.merged(own, "the replay options make_port() returned", _LOCALIZE_SETS,
                                        clash="own").but(model=model)

    def forced() -> Comparison:
        if step_fn is not None:  # the port given, built in this process
            return _check(trace, step_fn, options.but(forcing="state"), tolerance=tolerance, judge="plain")

        def run() -> Comparison:
            _, step, own = made()
            return _check(trace, step, own.but(forcing="state"), tolerance=tolerance, judge="plain")
        return apart(run)

    def replay_own(seed: Optional[int], path: str, restart_at: "frozenset[int]",
                   full_at: Optional[Callable[[int], bool]], steps: Optional[int] = None) -> Trace:
        def run() -> str:
            _, step, own = made()
            own = own if steps is None else own.but(steps=steps)
            replayed = _replay(trace, step, own, path, nudge=seed, restart_at=restart_at, jitter=True,
                               full_at=full_at).trace
            assert replayed is not None  # written: out is given
            replayed.close()
            return path
        return open_written(apart(run))  # written whole by this process or its child

    def against(seed: int, reference: Trace, restart_at: "frozenset[int]",
                full_at: Optional[Callable[[int], bool]]) -> Comparison:
        def run() -> Comparison:
            _, step, own = made()
            return _compared(trace, step, own, reference, Tolerance.exact(), measuring=True, nudge=seed,
                             restart_at=restart_at, jitter=True, full_at=full_at)[0]
        return apart(run)

    def replay_one(excerpt: str, model: Any, step: Any, own: ReplayOptions, path: str) -> Trace:
        written = _replay(excerpt, step, own.but(model=model, progress=None), path).trace
        assert written is not None
        return written

    return PortRuns(forced, replay_own, against, replay_one, made, apart)
