"""tracekit.jax.replay and check: a golden replayed through a JAX port's functional step (the
runner, runner.py, driven by the framework-free loop, replay/loop.py), and compared as it runs
(judge/port.py)."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import jax
import numpy as np

from ..comparison.arbiter import LONG_GOLDEN
from ..comparison.calibration import DEFAULT_MARGIN
from ..environment import fingerprint, port_identity
from ..errors import UsageError
from ..judge.diagnose import PortKind, calibrate_port, localize_port
from ..judge.local import Arbiter
from ..judge.port import check_arguments, local, options_for, plain, port_made, replayed
from ..judge.variants import conversions_in, name_by_variants, one_step
from ..replay.loop import Replayed, Sink, check_steps, step_for
from ..replay.options import ReplayOptions
from ..replay.returned import called, named
from ..report.calibration import Calibration
from ..report.localization import Localization
from ..report.reported import Reported
from ..store import Trace, open_trace
from ..store.remote import refuse_url
from ..structure import structured
from .arbiter import arbitrate
from .runner import JaxRunner

_INSTEAD = {"determinism": "set XLA_FLAGS=--xla_gpu_deterministic_ops=true for the port's process",
            "tf32": "set jax.config.update('jax_default_matmul_precision', ...) in the port",
            "model": "pass state= (the train state)"}


def _options(given: Mapping[str, Any], where: str) -> ReplayOptions:
    return options_for(given, where, "JAX", _INSTEAD)


def replay(golden: "str | Trace", step_fn: "Callable[..., Any] | Mapping[str, Callable[..., Any]]", *,
           state: Any = None, out: Optional[str] = None, **options: Any) -> Trace:
    """Drive a JAX port's training step through the golden's steps; the actual trace.

    step_fn(state, inputs) -> (state, loss or dict of named values): one functional training
      step (jitted or not), called once per recorded step with the train state and {golden input
      name: jax array}, as flax's examples write it (its gradients applied by
      state.apply_gradients).
    state: the port's train state: flax.training.train_state.TrainState (or a subclass that also
      holds batch_stats, ...). Its collections' leaves pair with the golden's variables under
      TF's names for their roles (params/hidden/kernel is hidden/kernel, a BatchNorm's scale
      gamma, batch_stats' mean moving_mean), or by var_map= (golden name -> the leaf's path,
      "params/hidden/kernel"); its optax state pairs with the golden's slots by role (mu is
      Adam's m, trace Momentum's accumulator, ...). The gradients are read as state.tx's update
      is handed them.
    The rest are tracekit.tf2.replay's: var_map, init, random ("tape": jax.random.bernoulli (flax's
    Dropout), uniform and normal take the golden's draws; "none"), steps, inputs, progress, every,
    forcing ("none", "state", "taps")."""
    run = _Run(golden, step_fn, state, _options(options, "tracekit.jax.replay"))
    trace = run.replay(out).trace
    assert trace is not None
    return trace


def check(golden: "str | Trace", step_fn: "Callable[..., Any] | Mapping[str, Callable[..., Any]] | None" = None, *,
          state: Any = None, tolerance: Any = None, fail_fast: bool = False, out: Optional[str] = None,
          make_port: Optional[Callable[[], Any]] = None, judge: str = "auto", **options: Any) -> Reported:
    """Replay and compare as the steps run (replay()'s arguments; tolerance as for
    tracekit.compare): the comparison, the actual trace written only where `out` is given.

    make_port: the port's factory in place of step_fn and state: a fresh (train state, step
    function[, {other replay options}]) per call. judge: "plain" (the replay as it runs), "local"
    (make_port's port teacher-forced, each step's own error; a failing step goes to the float64
    arbiter, jax/arbiter.py, and the steps it explains as round-off through a discontinuity are
    accepted; judge/local.py) or "auto" (local for a factory's port on a golden longer than
    LONG_GOLDEN steps, else plain). Where a plain check fails at a step and the port's conversions
    have variants (an LSTM's forget bias, its gate order: judge/variants.py), that step is replayed
    again with each. TensorFlow 2's verdict also judges the drift from the port's own state against
    an envelope of perturbed replays: not built for JAX ports yet, and said so in the result."""
    check_arguments("tracekit.jax.check", "(train state, step function)", fail_fast, judge, make_port,
                    {"step_fn": step_fn, "state": state})
    with (contextlib.nullcontext(golden) if isinstance(golden, Trace) else open_trace(golden)) as trace:
        if make_port is not None:
            locally = judge == "local" or (judge == "auto" and len(trace) > LONG_GOLDEN and "forcing" not in options)
            if locally and out is not None:
                raise UsageError("tracekit.jax.check(judge='local') writes no actual trace (its replays are "
                                 "teacher-forced and one step long): leave out out=, or check with judge='plain'")
            given = options
            state, step_fn, options = port_made(make_port, given)
            if locally:
                return _local(trace, lambda: port_made(make_port, given), state, step_fn, tolerance,
                              dict(options, forcing="state"))
        result = _plain(trace, step_fn, state, tolerance, fail_fast, out, options)
        name_by_variants(result, trace, conversions_in(options), lambda excerpt, pick: _plain(
            excerpt, step_fn, state, tolerance, True, None, one_step(options, pick)))
        return result


def _plain(trace: Trace, step_fn: Any, state: Any, tolerance: Any, fail_fast: bool, out: Optional[str],
           options: Mapping[str, Any]) -> Reported:
    run = _Run(trace, step_fn, state, _options(options, "tracekit.jax.check"))
    return plain(run.replay, trace, tolerance, fail_fast, out)


def _local(trace: Trace, make_port: Callable[[], Any], state: Any, step_fn: Any, tolerance: Any,
           options: Dict[str, Any]) -> Reported:
    """The local view: the port teacher-forced, its failing steps arbitrated in float64."""
    forced = _plain(trace, step_fn, state, tolerance, False, None, options)
    return local(trace, forced, _arbiter(trace, make_port), "JAX")


def _arbiter(trace: Trace, make_port: Callable[[], Any]) -> Arbiter:
    """The float64 arbiter (arbiter.py) of fresh ports from make_port (port_made's)."""
    def replay_one(excerpt: str, state: Any, step: Any, own: Dict[str, Any], out: str) -> Trace:
        given = _options(dict(own, progress=None, forcing="none"), "the float64 arbiter")
        written = _Run(excerpt, step, state, given).replay(out).trace
        assert written is not None
        return written
    return lambda step, failing: arbitrate(trace, step, failing, make_port, replay_one)


def _run(golden: Any, port: Tuple[Any, Any, Dict[str, Any]], where: str) -> "_Run":
    """The replay of a port made by a factory: (train state, step, replay options)."""
    state, step_fn, own = port
    return _Run(golden, step_fn, state, _options(own, where))


def localize(golden: str, make_port: Callable[[], Any], *, tolerance: Any = None, out: Optional[str] = None,
             steps: Optional[int] = None, **options: Any) -> Localization:
    """Find the first step whose own (local) error exceeds the tolerance, and the first tensor
    inside it, and write a one-step reproduction of it, as tracekit.tf2.localize does
    (judge/diagnose.py), for a JAX port's factory: make_port() returns a fresh (train state, step
    function[, {replay options}]). The failing steps of the teacher-forced replay go to the
    float64 arbiter (the state cast up under jax_enable_x64); the reproduction's script replays
    the step with tracekit.jax.check."""
    return localize_port(_KIND, golden, make_port, tolerance, out, steps, options)


def calibrate(golden: str, make_port: Callable[[], Any], *, runs: int = 4, margin: float = DEFAULT_MARGIN,
              progress: Optional[Callable[[int, int], None]] = None, **options: Any) -> Calibration:
    """Measure how much this model's training amplifies round-off and return a tolerance that
    covers it, as tracekit.tf2.calibrate does (judge/diagnose.py), for a JAX port's factory: the
    port replayed once as it is, then `runs` times from its variables moved one ulp at random
    (seeds 0..runs-1)."""
    return calibrate_port(_KIND, golden, make_port, runs, margin, progress, options)


class _Run:
    """One JAX replay's parts."""

    def __init__(self, golden: "str | Trace", step_fn: Any, state: Any, options: ReplayOptions) -> None:
        check_steps(step_fn)
        if state is None:
            raise UsageError("tracekit.jax needs the port's train state: state=<flax TrainState>")
        self.golden, self.step_fn, self.state, self.options = golden, step_fn, state, options

    def replay(self, out: Optional[str], watch: Optional[Callable[[Dict[str, Any]], Sink]] = None,
               stop: Optional[Callable[[], bool]] = None, nudge: Optional[int] = None) -> Replayed:
        refuse_url(out, "write a replay's trace")
        with (contextlib.nullcontext(self.golden) if isinstance(self.golden, Trace)
              else open_trace(self.golden)) as trace:
            runner = JaxRunner(trace, self.options, self.state)
            if self.options.init == "golden":
                runner.load_initial()
            structures = trace.meta.get("inputs")

            def call(index: int, feeds: Dict[str, Any], info: Dict[str, Any]) -> Dict[str, Any]:
                arrays = structured({name: _array_in(value) for name, value in feeds.items()}, structures)
                result = called(step_for(self.step_fn, info, index, trace.path), arrays, self.options.inputs,
                                runner.leaves.state())
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise UsageError("step %d: a JAX port's step returns (new train state, loss or dict of named "
                                     "values), got %s" % (index, type(result).__name__))
                runner.leaves.update(result[0], index)
                returned = named(result[1], lambda key, value: np.array(value, copy=True))
                runner.returned(returned)
                return returned
            meta = {"environment": fingerprint(), "program": port_identity(self.step_fn, None),
                    "jax": jax_environment()}
            return replayed(trace, runner, call, self.options, out, watch, stop, meta, nudge)


def _array_in(value: Any) -> Any:
    """A golden input as the port's step takes it: a jax array, or as read where JAX has no such
    dtype (strings)."""
    array = np.asarray(value)
    return jax.numpy.asarray(array) if array.dtype.kind in "biuf" else value


_KIND = PortKind("tracekit.jax", "state", _run, _arbiter)


def jax_environment() -> Dict[str, Any]:
    """What the running JAX tells of the numerics: its version, backend and devices, x64, the
    default matmul precision, XLA's flags."""
    config = jax.config
    return {"version": jax.__version__, "backend": jax.default_backend(),
            "devices": [str(d) for d in jax.devices()], "x64": bool(config.jax_enable_x64),
            "matmul_precision": str(config.jax_default_matmul_precision),
            "xla_flags": os.environ.get("XLA_FLAGS", "")}
