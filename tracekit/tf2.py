"""tracekit for TF2 ports: `tracekit.tf2.replay(golden, step_fn, ...)`.

Imports TensorFlow (selecting tf-keras, Keras 2, before the first import on TF >= 2.16).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
import tempfile
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from .comparison.calibration import MARGIN, Spread, derive
from .comparison.engine import REFRESH_STEPS, Comparer, Comparison, comparer
from .comparison.tolerance import Tolerance
from .environment import fingerprint, program_identity, tensorflow_environment
from .errors import UsageError
from .replay.conversions import Conversion, gru, lstm, partitioned, transpose
from .replay.capture import numpy
from .replay.distribute import Distribution, batch_size, logical_cpus, mirrored
from .replay.loop import Behind, Replayed, Sink, check_every, check_forcing, check_steps, replay_steps, step_for
from .replay.settings import numerics
from .replay.source import write_source
from .replay.tf2_runner import TF2Runner, aligned_seeds, call_step, check_usage, keras_train_step
from .replay.tf_import import tf  # tracekit.tf2.tf: the TensorFlow the replay drives
from .replay.variables import model_variables, name_of
from .replay.verdict import JUDGES, LONG_GOLDEN, PortRuns, arbitrate_local, judge_long
from .report.calibration import Calibration
from .report.localization import Localization
from .report.reported import Reported, compare
from .store import Trace, open_trace
from .store.excerpt import write_excerpt
from .structure import structured

__all__ = ["Conversion", "calibrate", "check", "gru", "keras_train_step", "localize", "logical_cpus", "lstm",
           "mirrored", "partitioned", "record", "replay", "seeded", "transpose"]


def replay(golden: "str | Trace", step_fn: "Callable[..., Any] | Mapping[str, Callable[..., Any]]", *,
           model: Any = None, variables: Any = None,
           var_map: Any = "auto", init: str = "golden", random: str = "tape", steps: Optional[int] = None,
           inputs: Optional[Dict[str, str]] = None, out: Optional[str] = None, convert: Sequence[Conversion] = (),
           progress: Optional[Callable[[int, int], None]] = None, strategy: Any = None,
           input_api: str = "dataset", global_batch_size: Optional[int] = None,
           determinism: Optional[bool] = None, tf32: Optional[bool] = None,
           grappler: "Mapping[str, bool] | bool | None" = None, every: int = 1, forcing: str = "none") -> Trace:
    """Drive `step_fn` through the golden's steps and return the actual trace.

    step_fn(inputs): the TF2 training step (eager or tf.function), called once per
      recorded step with {golden input name: tensor} (or keywords, with inputs=
      {golden input name: keyword}); it may return its loss or a dict of named values.
      For a golden of alternating train ops (a GAN's discriminator and generator steps,
      recorded as separate steps), a dict {train op name: step function}; `tracekit show`
      lists the golden's train_ops.
    model / variables: the TF2 variables, mapped to the golden's by name (var_map=
      "auto", a dict, (regex, replacement) rules or a callable); unmatched or
      shape-mismatched ones stop the replay before it starts, listed.
    convert: weight conversions for golden variables the port holds in another layout,
      e.g. [tracekit.tf2.lstm("rnn/lstm_cell", model.lstm)] for a TF1 LSTMCell ported to
      a Keras LSTM; values, gradients and slots are compared in the golden's layout.
    init: "golden" loads the golden's initial variables, slots and step count;
      "seed" keeps the port's own (build it inside tracekit.tf2.seeded(golden)).
    random: "tape" injects the golden's recorded random draws into the port's random
      ops, in order; "seed" aligns seeds only; "none" leaves TF2 randomness alone.
    steps: replay only the first N steps. every: capture gradients, taps, variables and slots
      every K-th step only (steps 0, K, 2K, ...), as the recorder's every=K; inputs, random
      draws, loss and learning rate are kept every step. out: where to write the actual trace; by default
      a temporary file, removed when the returned trace is closed or dropped, or the
      process exits (`.save(path)` keeps a copy).
    strategy: a tf.distribute strategy the model was built under; step_fn is then the
      port's distributed step: it receives the inputs as the strategy hands them out
      (batched ones as per-replica values, split by input_api: "dataset" as
      strategy.experimental_distribute_dataset splits a batch of global_batch_size rows,
      "function" as distribute_datasets_from_function with consecutive per-replica slices;
      global_batch_size defaults to the golden's first batch), calls strategy.run itself
      and returns cross-replica values (strategy.reduce(SUM, ...) of a loss scaled by the
      global batch). Gradients are captured all-reduced, as the optimizer applies them.
    determinism / tf32 / grappler: switch op determinism, TensorFloat-32 matmuls and
      Grappler passes (False: those that change float results; or a dict of options) for
      the replay; None leaves them. Recorded in the actual trace's environment.
    forcing: "none" lets the port run from its own state; "state" (teacher forcing) sets
      its variables, optimizer slots and step counter to the golden's state at the end of
      the step before, before every step after the first: each step's error is then that
      step's own (the local error), not what earlier steps accumulated; "taps" also hands
      the rest of each step the golden's value at every tracekit.tap (gradients still
      flow through the port's ops), so each tap's error is its own layers'. The actual
      trace records the mode, and the comparison's report says it.
    Gradients and the learning rate are captured from the Keras optimizer, taps from
    tracekit.tap(); the variables and slots are read after each step.
    """
    trace = _replay(golden, step_fn, model=model, variables=variables, var_map=var_map, init=init, random=random,
                    steps=steps, inputs=inputs, out=out, convert=convert, progress=progress, strategy=strategy,
                    input_api=input_api, global_batch_size=global_batch_size, determinism=determinism, tf32=tf32,
                    grappler=grappler, every=every, forcing=forcing).trace
    assert trace is not None  # written: replay() always writes
    return trace


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
    replays (replay/verdict.py; `out` then keeps that replay). judge: "auto" (that for long
    goldens given make_port, else "plain"), "plain" (the replay as it runs against the
    tolerance) or "local"."""
    if not isinstance(fail_fast, bool):
        raise UsageError("fail_fast must be True or False, got %r" % (fail_fast,))
    unknown = sorted(set(options) - _REPLAY_OPTIONS)
    if unknown:
        raise UsageError("tracekit.tf2.check got unknown options %s; it takes replay()'s: %s"
                         % (", ".join(unknown), ", ".join(sorted(_REPLAY_OPTIONS))))
    if judge not in JUDGES:
        raise UsageError("judge must be one of %s, got %r" % (", ".join(JUDGES), judge))
    if make_port is None and (step_fn is None or judge == "local"):
        raise UsageError("tracekit.tf2.check needs the port's step function%s: pass step_fn (and model=), or "
                         "make_port=" % (" and factory (make_port=) for judge='local'" if judge == "local" else ""))
    with (contextlib.nullcontext(golden) if isinstance(golden, Trace) else open_trace(golden)) as trace:
        if make_port is not None and (judge == "local" or judge == "auto" and len(trace) > LONG_GOLDEN
                                      and "forcing" not in options and options.get("strategy") is None):
            return _judged(trace, step_fn, make_port, tolerance, out, options)  # type: ignore[return-value]
        if step_fn is None:
            assert make_port is not None
            model, step_fn, own = _made(make_port, options, _LOCALIZE_SETS)
            options = dict(own, model=model)
        live = _Live(trace, out, tolerance)
        try:
            replayed = _replay(**_arguments(trace, step_fn, out, options), write=out is not None, watch=live,
                               stop=(lambda: live.diverged) if fail_fast else None)
        except BaseException:
            live.close(quiet=True)  # the replay's error is the news
            raise
        if replayed.trace is not None:
            replayed.trace.close()
        live.close()
        assert live.comparer is not None  # made when the replay started
        result = live.comparer.finish(replayed.meta, replayed.steps)
        first = result.first_divergence
        if replayed.meta["replay"]["stopped"] and first is not None:
            result.notes.append("fail_fast: stopped after step %d, at the first divergence (step %d)"
                                % (replayed.steps - 1, first.step))
        return result  # type: ignore[return-value]


def _judged(trace: Trace, step_fn: Any, make_port: Callable[[], Any], tolerance: "Tolerance | str | None",
            out: Optional[str], options: Mapping[str, Any]) -> Comparison:
    """A long golden's verdict (replay/verdict.py)."""
    if "forcing" in options or options.get("strategy") is not None:
        raise UsageError("judge='local' replays teacher-forced itself and does not run under a strategy yet: leave "
                         "out forcing= and strategy=")
    _check_port_options(options, _LOCALIZE_SETS, "tracekit.tf2.check(judge='local')")
    return judge_long(trace, _port_runs(trace, step_fn, make_port, tolerance, options), drift_out=out)


def _port_runs(trace: Trace, step_fn: Any, make_port: Callable[[], Any], tolerance: "Tolerance | str | None",
               options: Mapping[str, Any]) -> PortRuns:
    """The runs a long golden's verdict makes, each of a fresh port (the first may be the one given)."""
    def made() -> Tuple[Any, Any, Dict[str, Any]]:
        return _made(make_port, {}, _LOCALIZE_SETS)

    def forced() -> Comparison:
        given, own = step_fn, dict(options)
        if given is None:
            model, given, own = _made(make_port, options, _LOCALIZE_SETS)
            own["model"] = model
        return check(trace, given, tolerance=tolerance, judge="plain", forcing="state", **own)

    def replay_own(seed: Optional[int], path: str, restart_at: "frozenset[int]") -> Trace:
        model, step, own = _made(make_port, options, _LOCALIZE_SETS)
        written = _replay(**_arguments(trace, step, path, dict(own, model=model)), nudge=seed,
                          restart_at=restart_at, jitter=True).trace
        assert written is not None  # written: out is given
        return written

    def replay_one(excerpt: str, model: Any, step: Any, own: Dict[str, Any], path: str) -> Trace:
        written = _replay(**_arguments(excerpt, step, path, dict(options, **own, model=model, progress=None))).trace
        assert written is not None
        return written

    return PortRuns(forced, replay_own, replay_one, made)


class _Live:
    """The comparison a check feeds: made when the replay knows its own metadata, and run on a
    thread behind the port's steps."""

    def __init__(self, golden: Trace, out: Optional[str], tolerance: "Tolerance | str | None") -> None:
        self.golden, self.out, self.tolerance = golden, out, tolerance
        self.comparer: Optional[Comparer] = None  # once the replay starts
        self._behind: Optional[Behind] = None

    def __call__(self, meta: Dict[str, Any]) -> Behind:
        label = self.out if self.out is not None else "replay of %s (not written)" % meta["program"]["entry"]
        self.comparer = comparer(self.golden, label, meta, self.tolerance, result_type=Reported)
        self._behind = Behind(self.comparer, sync=self._refresh, sync_every=REFRESH_STEPS)
        return self._behind

    def _refresh(self) -> None:
        """Between steps, the comparer's thread idle: judge what it holds, then reopen the golden."""
        assert self.comparer is not None
        self.comparer.drain()
        self.golden.refresh()

    @property
    def diverged(self) -> bool:
        return self.comparer is not None and self.comparer.diverged

    def close(self, quiet: bool = False) -> None:
        """Wait for the steps handed over (raising what comparing them raised, unless quiet); end
        the comparer's reading threads."""
        if self._behind is None or self.comparer is None:
            return
        try:
            self._behind.close(quiet)
            if not quiet:
                self.comparer.drain()  # the last step fed
        finally:
            self.comparer.close()


_REPLAY = inspect.signature(replay)
_REPLAY_OPTIONS = frozenset(_REPLAY.parameters) - {"golden", "step_fn", "out"}


def _arguments(golden: Any, step_fn: Any, out: Optional[str], options: Mapping[str, Any]) -> Dict[str, Any]:
    """replay()'s arguments for _replay, its defaults filled in (written once, in replay())."""
    arguments = _REPLAY.bind(golden, step_fn, out=out, **options)
    arguments.apply_defaults()
    return dict(arguments.arguments)


def _replay(golden: "str | Trace", step_fn: Any, *, model: Any, variables: Any, var_map: Any, init: str, random: str,
            steps: Optional[int], inputs: Optional[Dict[str, str]], out: Optional[str], convert: Sequence[Conversion],
            progress: Optional[Callable[[int, int], None]], strategy: Any, input_api: str,
            global_batch_size: Optional[int], determinism: Optional[bool], tf32: Optional[bool],
            grappler: "Mapping[str, bool] | bool | None", every: int, forcing: str = "none", write: bool = True,
            watch: Optional[Callable[[Dict[str, Any]], Sink]] = None,
            stop: Optional[Callable[[], bool]] = None, nudge: Optional[int] = None,
            restart_at: "frozenset[int]" = frozenset(), jitter: bool = False) -> Replayed:
    """replay()'s work, its options all given (their defaults are replay()'s); write=False
    writes nothing, watch(meta) makes a sink fed every step, stop() ends the replay early,
    nudge=seed moves the port's starting state by one ulp (TF2Runner.nudge; jitter: after every
    step too), restart_at forces the golden's state at those steps (replay_steps)."""
    check_usage(init, random)  # before the golden is opened: the usage error comes first
    check_steps(step_fn)
    check_every(every)
    check_forcing(forcing)
    with numerics(determinism, tf32, grappler), \
            (contextlib.nullcontext(golden) if isinstance(golden, Trace) else open_trace(golden)) as trace:
        distribution = None
        if strategy is not None:
            if len(trace) == 0:
                raise UsageError("%s has no steps to replay under a strategy" % trace.path)
            first = trace.step(0)
            size = global_batch_size or batch_size({n: first["input", n] for n in first.names("input")})
            distribution = Distribution(strategy, input_api, size)
        return _run(trace, step_fn, model, variables, var_map, init, random, steps, inputs, out, convert, progress,
                    {"golden": trace.path}, distribution=distribution, every=every, write=write, watch=watch,
                    stop=stop, forcing=forcing, nudge=nudge, restart_at=restart_at, jitter=jitter)


def record(step_fn: Callable[..., Any], data: Sequence[Mapping[str, Any]], *, model: Any = None,
           variables: Any = None, inputs: Optional[Dict[str, str]] = None, out: Optional[str] = None,
           progress: Optional[Callable[[int, int], None]] = None) -> Trace:
    """Run `step_fn` on `data` from the port's own current state, recording it as a replay
    records: inputs, random draws, taps, loss, learning rate, gradients, variables and slots
    under the port's own variable names. This is what a golden is made of when no legacy
    recording exists (a *derived* golden: the pytest plugin's --tracekit-update=new with
    data=). `data` holds one {input name: array} per step, as the step function receives it;
    the rest is as for replay(), whose trace this returns (random draws are TF2's own)."""
    check_steps(step_fn)
    tf_vars = list(variables) if variables is not None else model_variables(model)
    if not tf_vars:
        raise UsageError("no TF2 variables to record: build the model first (call it on a batch), or pass "
                         "variables=[...]")
    directory = tempfile.mkdtemp(prefix="tracekit-source-")
    try:
        source = os.path.join(directory, "source.h5")
        write_source(source, [(name_of(v), numpy(v)) for v in tf_vars], data)
        with open_trace(source) as trace:
            written = _run(trace, step_fn, model, tf_vars, "auto", "golden", "none", None, inputs, out, (), progress,
                           {"golden": None, "source": "data"}, pass_through=True).trace
            assert written is not None
            return written
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _run(trace: Trace, step_fn: Any, model: Any, variables: Any, var_map: Any, init: str, random: str,
         steps: Optional[int], inputs: Optional[Dict[str, str]], out: Optional[str], convert: Sequence[Conversion],
         progress: Optional[Callable[[int, int], None]], about: Dict[str, Any], pass_through: bool = False,
         distribution: Optional[Distribution] = None, every: int = 1, write: bool = True,
         watch: Optional[Callable[[Dict[str, Any]], Sink]] = None, stop: Optional[Callable[[], bool]] = None,
         forcing: str = "none", nudge: Optional[int] = None, restart_at: "frozenset[int]" = frozenset(),
         jitter: bool = False) -> Replayed:
    runner = TF2Runner(trace, model, variables, var_map, init, random, convert, pass_through, distribution)
    if init == "golden":
        runner.load_initial()
    if nudge is not None:
        runner.nudge(nudge, every_step=jitter)
        about = dict(about, nudge=nudge, jitter=jitter)  # the trace says its start (or every step) was moved
    about = dict(about, init=init, random=random,
                 mapping={name: cand.name for name, cand in runner.mapping.pairs.items()},
                 matched_by=dict(runner.mapping.how),
                 converted={name: conv.describe for conv in runner.conversions for name in conv.golden})
    scope = seeded(trace) if random == "seed" else contextlib.suppress()
    structures = trace.meta.get("inputs")  # read once, not every step
    with scope:
        def call(index: int, feeds: Dict[str, Any], info: Dict[str, Any]) -> Dict[str, Any]:
            tensors = distribution.distribute(feeds) if distribution is not None else \
                {name: tf.constant(value) for name, value in feeds.items()}
            tensors = structured(tensors, structures)  # + inputs["features"]["color"], ...
            return call_step(step_for(step_fn, info, index, trace.path), tensors, inputs)
        # the environment here, not left to the writer: a check compares it before anything is written
        meta = {"environment": fingerprint(), "tensorflow": tensorflow_environment(tf),
                "program": _program(step_fn, model)}
        return replay_steps(trace, runner, call, steps, out, about, progress, meta=meta, every=every, write=write,
                            sink=watch(meta) if watch is not None else None, stop=stop, forcing=forcing,
                            restart_at=restart_at)


def _program(step_fn: Any, model: Any) -> Dict[str, Any]:
    """The port's identity: its step functions and model class, and the files they come from."""
    functions = [step_fn[k] for k in sorted(step_fn)] if isinstance(step_fn, Mapping) else [step_fn]
    parts = [getattr(f, "python_function", f) for f in functions]  # a tf.function's Python function
    parts += [type(model)] if model is not None else []
    names = ["%s.%s" % (getattr(p, "__module__", "?"), getattr(p, "__qualname__", repr(p))) for p in parts]
    sources = []
    for part in parts:
        try:
            sources.append(inspect.getsourcefile(part))
        except TypeError:  # a builtin or C-implemented callable: no file to hash
            sources.append(None)
    return program_identity(" + ".join(names), sources)


def localize(golden: str, make_port: Callable[[], Any], *, tolerance: "Tolerance | str | None" = None,
             out: Optional[str] = None, steps: Optional[int] = None, **options: Any) -> Localization:
    """Find the first step whose own (local) error exceeds the tolerance, and the first stage and
    tensor inside it, and write a one-step reproduction of it.

    make_port() returns a fresh (model, step function) each time it is called, or (model, step
    function, {replay option: value}) for options that name the port's objects (convert=,
    variables=). The port runs from its own state (replay's default); if it fails, again with
    forcing="state" (each step from the golden's state), whose failing steps the float64 arbiter
    judges (replay/verdict.py): those it explains as round-off through a discontinuity are
    accepted, and the first it does not is the first local error; where the golden has taps, the steps up to it once more with forcing="taps",
    which names the first layer at fault. The reproduction is a golden of that one step
    (store/excerpt.py) written under `out` (a new temporary directory by default), with a
    script that replays it when make_port is importable by name; it is replayed once to check
    that it fails. `options` go to every replay (var_map, convert, inputs, ...); tolerance as
    for tracekit.compare."""
    _check_port_options(options, _LOCALIZE_SETS, "tracekit.tf2.localize")

    def run(forcing: str, count: Optional[int]) -> Reported:
        model, step, own = _made(make_port, options, _LOCALIZE_SETS)
        return check(golden, step, model=model, tolerance=tolerance, forcing=forcing, steps=count, **own)
    plain = run("none", steps)
    if plain.ok:
        return Localization(golden, plain, plain)
    state = run("state", steps)
    with open_trace(golden) as trace:
        runs = _port_runs(trace, None, make_port, tolerance, options)
        arbitrate_local(trace, state, runs.make_port, runs.replay_one)
    found = Localization(golden, plain, state)
    first = state.first_divergence
    if first is None:
        return found  # only drift, or the replay is short or misses tensors: the reports say which
    found.step, found.key = first.step, first.key
    with open_trace(golden) as trace:
        has_taps = bool(trace.names("tap"))
        if first.step < 0:
            return found  # the initial state differs: the variables as loaded, no step to reproduce
        if has_taps:
            found.taps = run("taps", first.step + 1)
            tapped = found.taps.first_divergence
            if tapped is not None and tapped.step == first.step:
                found.key = tapped.key
        folder = out or tempfile.mkdtemp(prefix="tracekit-localize-")
        os.makedirs(folder, exist_ok=True)
        stem = os.path.splitext(os.path.basename(trace.path))[0]
        found.reproduction = write_excerpt(trace, first.step, os.path.join(folder, "%s-step%d.h5" % (stem, first.step)))
    found.script = _reproduction_script(found.reproduction, make_port, tolerance, options)
    model, step, own = _made(make_port, options, _LOCALIZE_SETS)
    found.reproduces = not check(found.reproduction, step, model=model, tolerance=tolerance, **own).ok
    return found


def calibrate(golden: str, make_port: Callable[[], Any], *, runs: int = 4, margin: float = MARGIN,
              progress: Optional[Callable[[int, int], None]] = None, **options: Any) -> Calibration:
    """Measure how much this model's training amplifies round-off and return a tolerance that
    covers it (comparison/calibration.py says how it is derived).

    make_port() returns a fresh (model, step function) each time it is called (or a third item,
    replay options naming the port's objects, as for localize). The port is replayed once as
    it is, then `runs` more times, each from a start moved one ulp up or down at random in
    every nonzero element (seeds 0..runs-1: the result is reproducible on one machine). Step 0
    keeps the default tolerance; from step 1, per tensor and band of steps, the largest
    deviation of those runs from the first, times `margin`, rounded up to a power of two,
    becomes a rule where it exceeds the floor (the training profile). No rule exceeds the cap
    (1/64 of a float32 tensor's scale): a tensor that would need more is listed as refused,
    and the tolerance then accepts failures the noise analysis explains (accept_noise). The
    result holds the tolerance (`.tolerance`, `.save(path)` as TOML) and the first replay
    compared with the golden under it (`.port`, `.ok`). progress(done, runs + 1) as the
    replays finish; `options` go to every replay (var_map, convert, inputs, steps, ...)."""
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise UsageError("runs must be a whole number of replays, at least 1, got %r" % (runs,))
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 1 <= margin < float("inf"):
        raise UsageError("margin must be a finite number >= 1 (the factor over the largest deviation seen), got %r"
                         % (margin,))
    if "forcing" in options:
        raise UsageError("calibrate measures how training carries round-off from step to step: it replays without "
                         "forcing, got forcing=%r" % (options["forcing"],))
    _check_port_options(options, _CALIBRATE_SETS, "tracekit.tf2.calibrate")

    def run(seed: Optional[int], path: str) -> Trace:
        model, step, own = _made(make_port, options, _CALIBRATE_SETS)
        written = _replay(**_arguments(golden, step, path, dict(own, model=model)), nudge=seed).trace
        assert written is not None  # written: out is given
        return written

    spread = Spread()
    with tempfile.TemporaryDirectory(prefix="tracekit-calibrate-") as folder:
        with run(None, os.path.join(folder, "unperturbed.h5")) as base:
            for seed in range(runs):
                if progress is not None:
                    progress(seed + 1, runs + 1)
                with run(seed, os.path.join(folder, "nudged-%d.h5" % seed)) as nudged:
                    spread.add(compare(base, nudged, Tolerance.exact()))
            derived = derive(spread, margin)
            port = compare(golden, base, derived.tolerance)
            if progress is not None:
                progress(runs + 1, runs + 1)
    return Calibration(golden, float(margin), spread, derived, port)


# The replay options localize and calibrate set themselves (the model is make_port()'s).
_LOCALIZE_SETS = frozenset({"model", "forcing", "steps"})
_CALIBRATE_SETS = frozenset({"model", "forcing"})


def _check_port_options(options: Mapping[str, Any], sets: "frozenset[str]", where: str) -> None:
    unknown = sorted(set(options) - (_REPLAY_OPTIONS - sets))
    if unknown:
        raise UsageError("%s: cannot pass on option(s) %s; it takes replay()'s options but %s: %s"
                         % (where, ", ".join(unknown), ", ".join(sorted(sets)),
                            ", ".join(sorted(_REPLAY_OPTIONS - sets))))


def _made(make_port: Callable[[], Any], options: Mapping[str, Any],
          sets: "frozenset[str]") -> Tuple[Any, Any, Dict[str, Any]]:
    """A fresh port from make_port(): its model, step function, and the replay options (the
    caller's, and those it returned as a third item, checked as the caller's are)."""
    made = make_port()
    if not isinstance(made, tuple) or len(made) not in (2, 3) or (len(made) == 3 and not isinstance(made[2], Mapping)):
        got = "a tuple of %d" % len(made) if isinstance(made, tuple) else type(made).__name__
        raise UsageError("make_port() must return (model, step function) or (model, step function, {replay option: "
                         "value}), got %s" % got)
    own = dict(made[2]) if len(made) == 3 else {}
    _check_port_options(own, sets, "the replay options make_port() returned")
    twice = sorted(set(own) & set(options))
    if twice:
        raise UsageError("replay option(s) %s given both by make_port() and by the caller" % ", ".join(twice))
    return made[0], made[1], dict(options, **own)


def _reproduction_script(reproduction: str, make_port: Any, tolerance: Any, options: Mapping[str, Any]) -> Optional[str]:
    """A script replaying the reproduction with the port, where make_port is importable by name.
    It passes on the tolerance (a Tolerance as a TOML file beside it), and the replay options
    that are plain values (random="none", steps, ...); it names the ones it cannot write (a
    var_map function)."""
    module, name = getattr(make_port, "__module__", None), getattr(make_port, "__qualname__", "")
    if not module or not name or "<" in name or module == "__main__":
        return None
    literal = {k: v for k, v in options.items() if isinstance(v, (str, int, float, bool, type(None)))}
    left_out = sorted(set(options) - set(literal))
    tolerance_code = repr(tolerance if isinstance(tolerance, str) else None)
    if isinstance(tolerance, Tolerance):  # written beside the script, which loads it
        policy = os.path.splitext(reproduction)[0] + ".tolerance.toml"
        with open(policy, "w", encoding="utf-8") as fh:
            fh.write(tolerance.to_toml())
        tolerance_code = "tracekit.Tolerance.load(%r)" % policy
    script = os.path.splitext(reproduction)[0] + ".py"
    with open(script, "w") as fh:
        fh.write('"""Replays one step of a golden where the port first computes differently (tracekit localize)."""\n'
                 "import tracekit\nimport tracekit.tf2\nfrom %s import %s\n\nmade = %s()\n%s"
                 "result = tracekit.tf2.check(%r, made[1], model=made[0], tolerance=%s%s,\n"
                 "                            **(made[2] if len(made) > 2 else {}))\nprint(result.report())\n"
                 "raise SystemExit(0 if result.ok else 1)\n"
                 % (module, name.split(".")[0], name,
                    "# localize also had %s: pass them here as it got them\n" % ", ".join(left_out) if left_out else "",
                    reproduction, tolerance_code,
                    "".join(", %s=%r" % kv for kv in sorted(literal.items()))))
    return script


def seeded(golden: "str | Trace") -> Any:
    """A context manager: seeds aligned with the golden's recording, as tf.compat.v1.keras.
    utils.DeterministicRandomTestTool does (build the model inside it for init="seed");
    yields the tool."""
    return aligned_seeds(golden if isinstance(golden, Trace) else open_trace(golden))
