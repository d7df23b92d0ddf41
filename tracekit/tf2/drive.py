"""The replay itself: tracekit.tf2.replay's options (replay/options.py) driven through the
runner and loop for a replay, a derived golden (derive), and the runs localize, calibrate
and the verdict on long goldens make (each of a fresh port from its factory)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import warnings
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from ..environment import fingerprint, port_identity
from ..errors import UsageError
from ..keys import REPLAY
from ..replay.conversions import Conversion
from ..replay.factory import made
from ..replay.loop import Replayed, Sink, check_steps, replay_steps, step_for
from ..replay.options import ReplayOptions
from ..replay.source import write_source
from ..replay.variables import model_variables, name_of
from ..store import Trace, open_trace
from ..store.remote import refuse_url
from ..structure import structured
from ..tf_environment import tensorflow_environment
from .capture import numpy
from .distribute import Distribution, batch_size
from .keras_optimizers import keras_of
from .port_step import aligned_seeds, call_step
from .settings import numeric_switches
from .tf2_runner import TF2Runner
from .tf_import import tf

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
    options = ReplayOptions(model=model, variables=variables, var_map=var_map, init=init, random=random, steps=steps,
                            inputs=inputs, convert=convert, progress=progress, strategy=strategy, input_api=input_api,
                            global_batch_size=global_batch_size, determinism=determinism, tf32=tf32,
                            grappler=grappler, every=every, forcing=forcing)
    trace = _replay(golden, step_fn, options, out).trace
    assert trace is not None  # written: replay() always writes
    return trace


def _replay(golden: "str | Trace", step_fn: Any, options: ReplayOptions, out: Optional[str] = None, *,
            write: bool = True, watch: Optional[Callable[[Dict[str, Any]], Sink]] = None,
            stop: Optional[Callable[[], bool]] = None, nudge: Optional[int] = None,
            restart_at: "frozenset[int]" = frozenset(), jitter: bool = False,
            full_at: Optional[Callable[[int], bool]] = None) -> Replayed:
    """replay()'s work; write=False writes nothing, watch(meta) makes a sink fed every step,
    stop() ends the replay early, nudge=seed moves the port's starting state by one ulp
    (TF2Runner.nudge; jitter: after every step too), restart_at forces the golden's state at
    those steps, full_at(index) says which steps are captured in full (replay_steps)."""
    refuse_url(out, "write a replay's trace")  # before the golden is opened: the usage error comes first
    check_steps(step_fn)
    with numeric_switches(options.determinism, options.tf32, options.grappler), \
            (contextlib.nullcontext(golden) if isinstance(golden, Trace) else open_trace(golden)) as trace:
        distribution = None
        if options.strategy is not None:
            if len(trace) == 0:
                raise UsageError("%s has no steps to replay under a strategy" % trace.path)
            first = trace.step(0)
            size = options.global_batch_size or batch_size({n: first["input", n] for n in first.names("input")})
            distribution = Distribution(options.strategy, options.input_api, size)
        return _run(trace, step_fn, options, out, {"golden": trace.path}, distribution=distribution, write=write,
                    watch=watch, stop=stop, nudge=nudge, restart_at=restart_at, jitter=jitter, full_at=full_at)


def derive(step_fn: Callable[..., Any], data: Sequence[Mapping[str, Any]], *, model: Any = None,
           variables: Any = None, inputs: Optional[Dict[str, str]] = None, out: Optional[str] = None,
           progress: Optional[Callable[[int, int], None]] = None) -> Trace:
    """Run `step_fn` on `data` from the port's own current state, recording it as a replay
    records: inputs, random draws, taps, loss, learning rate, gradients, variables and slots
    under the port's own variable names. This is what a golden is made of when no legacy
    recording exists (a *derived* golden: the pytest plugin's --tracekit-update=new with
    data=). `data` holds one {input name: array} per step, as the step function receives it;
    the rest is as for replay(), whose trace this returns (random draws are TF2's own)."""
    check_steps(step_fn)
    refuse_url(out, "write a trace")
    tf_vars = list(variables) if variables is not None else model_variables(model)
    if not tf_vars:
        raise UsageError("no TF2 variables to record: build the model first (call it on a batch), or pass "
                         "variables=[...]")
    directory = tempfile.mkdtemp(prefix="tracekit-source-")
    try:
        source = os.path.join(directory, "source.h5")
        write_source(source, [(name_of(v), numpy(v)) for v in tf_vars], data)
        options = ReplayOptions(model=model, variables=tf_vars, random="none", inputs=inputs, progress=progress)
        with open_trace(source) as trace:
            written = _run(trace, step_fn, options, out, {"golden": None, "source": "data"}, pass_through=True).trace
            assert written is not None
            return written
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def record(*args: Any, **kwargs: Any) -> Trace:
    """The former name of derive() (a golden derived from a TF2 run), which
    tracekit.tf1.record's, recording a legacy run, made ambiguous; it warns."""
    warnings.warn("tracekit.tf2.record is now tracekit.tf2.derive: it derives a golden from a TF2 run "
                  "(tracekit.tf1.record records a legacy one)", DeprecationWarning, stacklevel=2)
    return derive(*args, **kwargs)


def _run(trace: Trace, step_fn: Any, options: ReplayOptions, out: Optional[str], about: Dict[str, Any],
         pass_through: bool = False, distribution: Optional[Distribution] = None, write: bool = True,
         watch: Optional[Callable[[Dict[str, Any]], Sink]] = None, stop: Optional[Callable[[], bool]] = None,
         nudge: Optional[int] = None, restart_at: "frozenset[int]" = frozenset(), jitter: bool = False,
         full_at: Optional[Callable[[int], bool]] = None) -> Replayed:
    runner = TF2Runner(trace, options, pass_through, distribution)
    if options.init == "golden":
        runner.load_initial()
    if nudge is not None:
        runner.nudge(nudge, every_step=jitter)
        about = dict(about, nudge=nudge, jitter=jitter)  # the trace says its start (or every step) was moved
    about = dict(about, init=options.init, random=options.random,
                 mapping=dict({name: cand.name for name, cand in runner.mapping.pairs.items()},
                              **runner.port_state.described()),
                 matched_by=dict(runner.mapping.how, **runner.port_state.mapping.how),
                 converted={name: conv.describe for conv in runner.conversions for name in conv.golden})
    scope = seeded(trace) if options.random == "seed" else contextlib.suppress()
    structures = trace.meta.get("inputs")  # read once, not every step
    with scope:
        def call(index: int, feeds: Dict[str, Any], info: Dict[str, Any]) -> Dict[str, Any]:
            tensors = distribution.distribute(feeds) if distribution is not None else \
                {name: tf.constant(value) for name, value in feeds.items()}
            tensors = structured(tensors, structures)  # + inputs["features"]["color"], ...
            return call_step(step_for(step_fn, info, index, trace.path), tensors, options.inputs)
        # the environment here, not left to the writer: a check compares it before anything is written
        meta = {"environment": fingerprint(), "program": port_identity(step_fn, options.model),
                "tensorflow": dict(tensorflow_environment(tf), keras=keras_of(options.model))}
        # a sink judges as the replay runs: it is told now which steps will start from the golden's state
        plan = {REPLAY: {"init": options.init, "forcing": options.forcing, "restarted_at": sorted(restart_at)}}
        return replay_steps(trace, runner, call, options, out, about, meta=meta, write=write,
                            sink=watch(dict(meta, **plan)) if watch is not None else None, stop=stop,
                            restart_at=restart_at, full_at=full_at)


# The replay options localize and calibrate set themselves (the model is make_port()'s).
_LOCALIZE_SETS = frozenset({"model", "forcing", "steps"})
_CALIBRATE_SETS = frozenset({"model", "forcing"})


def _made(make_port: Callable[[], Any], options: ReplayOptions,
          sets: "frozenset[str]") -> Tuple[Any, Any, ReplayOptions]:
    """A fresh port from make_port(): its model, step function, and the replay options (the
    caller's, its model, and those it returned as a third item, checked as the caller's are)."""
    model, step, own = made(make_port)
    return model, step, options.merged(own, "the replay options make_port() returned", sets).but(model=model)


def seeded(golden: "str | Trace") -> Any:
    """A context manager: seeds aligned with the golden's recording, as tf.compat.v1.keras.
    utils.DeterministicRandomTestTool does (build the model inside it for init="seed");
    yields the tool."""
    return aligned_seeds(golden if isinstance(golden, Trace) else open_trace(golden))
