"""What a framework adapter's replay() and check() share, framework-free: the replay options a
port of another framework than TensorFlow takes, the port a factory makes, the arguments check()
is given, and the plain check (the replay compared as it runs). tracekit/torch/ and tracekit/jax/
build their entry points on it."""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ..errors import UsageError
from ..keys import REPLAY
from ..replay.factory import made
from ..replay.loop import Replayed, Sink, StepCall, replay_steps
from ..replay.options import ReplayOptions
from ..report.reported import Reported
from ..store import Trace
from ..store.meta import ReplayMeta
from .live import compared
from .local import Arbiter, arbitrate_local

# ReplayOptions' fields that are TensorFlow's alone -> what a port of another framework does instead.
TF_ONLY = {"variables": "pass the port's model", "strategy": "not supported for this framework yet",
           "input_api": "not supported for this framework yet",
           "global_batch_size": "not supported for this framework yet",
           "grappler": "TensorFlow's graph optimizer: this framework has none"}


def options_for(given: Mapping[str, Any], where: str, framework: str,
                instead: Mapping[str, str] = {}) -> ReplayOptions:
    """The replay options of a `framework` port, checked: TensorFlow's own (TF_ONLY, and
    `instead`: option -> what to do in this framework) and the seeded modes refused by name."""
    options = ReplayOptions.of(given, where)
    refused = dict(TF_ONLY, **instead)
    for name in sorted(set(given) & set(refused)):
        raise UsageError("%s: option %s is TensorFlow's (%s)" % (where, name, refused[name]))
    if options.random == "seed":
        raise UsageError("%s: random='seed' aligns TensorFlow's seeds; a %s port takes the golden's draws "
                         "(random='tape') or its own (random='none')" % (where, framework))
    if options.init == "seed":
        raise UsageError("%s: init='seed' builds a TensorFlow model from the golden's seeds; a %s port starts "
                         "from the golden's state (init='golden')" % (where, framework))
    return options


def port_made(make_port: Callable[[], Any], options: Mapping[str, Any]) -> Tuple[Any, Any, Dict[str, Any]]:
    """A fresh port from make_port: (its model or state, its step, its replay options joined with
    the caller's; one given by both is an error)."""
    model, step_fn, own = made(make_port)
    twice = sorted(set(own) & set(options))
    if twice:
        raise UsageError("replay option(s) %s given both by make_port() and by the caller" % ", ".join(twice))
    return model, step_fn, dict(options, **own)


def check_arguments(where: str, held: str, fail_fast: Any, judge: str, make_port: Any, given: Mapping[str, Any],
                    judges: Tuple[str, ...] = ("auto", "plain", "local")) -> None:
    """check()'s arguments, checked: `given` the port's parts passed one by one (step_fn, model,
    ...: None where not given), `held` what make_port returns, as a message names it."""
    if not isinstance(fail_fast, bool):
        raise UsageError("fail_fast must be True or False, got %r" % (fail_fast,))
    if judge not in judges:
        raise UsageError("judge must be one of %s, got %r" % (", ".join(judges), judge))
    if make_port is None and judge == "local":
        raise UsageError("%s(judge='local') needs the port's factory: pass make_port= (a fresh %s per call)"
                         % (where, held))
    passed = sorted(name for name, value in given.items() if value is not None)
    if make_port is not None and passed:
        raise UsageError("%s takes the port's factory (make_port=, returning %s) or its %s, not both: got %s"
                         % (where, held, ", ".join(sorted(given)), ", ".join(passed)))
    if make_port is None and given.get("step_fn") is None:
        raise UsageError("%s needs the port: its %s, or its factory (make_port=)" % (where, ", ".join(sorted(given))))


# run(out, watch, stop) -> the replay (an adapter's), its trace written where `out` is given.
RunReplay = Callable[[Optional[str], Optional[Callable[[Dict[str, Any]], Sink]], Optional[Callable[[], bool]]],
                     Replayed]


def plain(run: RunReplay, trace: Trace, tolerance: Any, fail_fast: bool, out: Optional[str]) -> Reported:
    """The replay compared as it runs, against the tolerance; where fail_fast stopped it, said."""
    result, replayed = compared(lambda watch, stop: run(out, watch, stop), trace, tolerance, out, fail_fast)
    first = result.first_divergence
    if ReplayMeta.of(replayed.meta[REPLAY]).stopped and first is not None:
        result.notes.append("fail_fast: stopped after step %d, at the first divergence (step %d)"
                            % (replayed.steps - 1, first.step))
    return result


def local(golden: Trace, forced: Reported, arbiter: Arbiter, framework: str) -> Reported:
    """The local view of a verdict: `forced`, the port's teacher-forced comparison, its failing
    steps handed to the adapter's float64 `arbiter` (judge/local.py)."""
    forced.judged = "local"
    arbitrate_local(golden, forced, arbiter)
    forced.notes.append("judged by each step's own error (teacher-forced) and the float64 arbiter; the drift from "
                        "the port's own state is not judged for %s ports yet" % framework)
    return forced


def replayed(trace: Trace, runner: Any, call: StepCall, options: ReplayOptions, out: Optional[str],
             watch: Optional[Callable[[Dict[str, Any]], Sink]], stop: Optional[Callable[[], bool]],
             meta: Dict[str, Any], nudge: Optional[int] = None) -> Replayed:
    """A port's replay by the framework-free loop (replay/loop.py), with what its runner paired
    (a replay/port_runner.py runner: each port object named by its `dotted` path) in the trace's
    metadata, and a watcher (a check's comparer) told the plan first. nudge=seed: the port's
    start (as loaded) moved one ulp at random first (PortRunner.nudge), and the trace says so."""
    pairs = list(runner.mapping.pairs.items()) + list(runner.port_state.mapping.pairs.items())
    about = {"golden": trace.path, "init": options.init, "random": options.random,
             "mapping": {name: cand.obj.dotted for name, cand in pairs},
             "matched_by": dict(runner.mapping.how, **runner.port_state.mapping.how),
             "converted": {name: conv.describe for conv in runner.conversions for name in conv.golden}}
    if nudge is not None:
        runner.nudge(nudge)
        about.update(nudge=nudge, jitter=False)
    plan = {REPLAY: {"init": options.init, "forcing": options.forcing, "restarted_at": []}}
    return replay_steps(trace, runner, call, options, out, about, meta=meta, write=out is not None or watch is None,
                        sink=watch(dict(meta, **plan)) if watch is not None else None, stop=stop)

