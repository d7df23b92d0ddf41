"""tracekit.torch.replay and check: a golden replayed through a PyTorch port's step (the
runner, runner.py, driven by the framework-free loop, replay/loop.py), and compared as it
runs (judge/live.py)."""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import numpy as np
import torch

from ..comparison.arbiter import LONG_GOLDEN
from ..comparison.calibration import DEFAULT_MARGIN
from ..environment import fingerprint, port_identity
from ..errors import UsageError
from ..judge.diagnose import PortKind, calibrate_port, localize_port
from ..judge.local import Arbiter
from ..judge.port import check_arguments, local, options_for, plain, port_made, replayed
from ..judge.variants import Setting, conversions_in, name_by_variants, one_step
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
from .runner import TorchRunner
from .settings import settings

# What torch does in place of TensorFlow's own options.
_INSTEAD = {"determinism": "call torch.use_deterministic_algorithms(True) in the port",
            "tf32": "set torch.backends.cuda.matmul.allow_tf32 in the port"}


def _options(given: Mapping[str, Any], where: str) -> ReplayOptions:
    return options_for(given, where, "PyTorch", _INSTEAD)


def replay(golden: "str | Trace", step_fn: "Callable[..., Any] | Mapping[str, Callable[..., Any]]", *,
           model: Any = None, optimizer: Any = None, out: Optional[str] = None, **options: Any) -> Trace:
    """Drive a PyTorch port's training step through the golden's steps; the actual trace.

    step_fn(inputs): one training step (forward, backward, optimizer.step()), called once per
      recorded step with {golden input name: torch.Tensor}; it returns its loss or a dict of
      named values, as tracekit.tf2.replay's does.
    model: the torch.nn.Module; its parameters and buffers pair with the golden's variables
      under TF's names for them (`hidden.weight` of an nn.Linear is `hidden/kernel`, in
      Dense's (in, out) layout), or by var_map= (golden name -> torch's dotted name, the
      tensor itself, or None).
    optimizer: the torch.optim optimizer(s) the step calls .step() on: their state pairs with
      the golden's slots by role (exp_avg is Adam's m, momentum_buffer Momentum's accumulator,
      ...); gradients are read as the optimizer's step begins (after any clipping), and before
      clip_grad_norm_ where the golden kept the unclipped ones.
    The rest are tracekit.tf2.replay's: var_map, init, random ("tape": dropout and
    torch.rand/randn take the golden's draws; "none"), steps, inputs, convert, progress,
    every, forcing ("none", "state", "taps")."""
    run = _Run(golden, step_fn, model, optimizer, _options(dict(options, model=model), "tracekit.torch.replay"))
    trace = run.replay(out).trace
    assert trace is not None
    return trace


def check(golden: "str | Trace", step_fn: "Callable[..., Any] | Mapping[str, Callable[..., Any]] | None" = None, *,
          model: Any = None, optimizer: Any = None, tolerance: Any = None, fail_fast: bool = False,
          out: Optional[str] = None, make_port: Optional[Callable[[], Any]] = None, judge: str = "auto",
          **options: Any) -> Reported:
    """Replay and compare as the steps run (replay()'s arguments; tolerance as for
    tracekit.compare): the comparison, the actual trace written only where `out` is given.

    make_port: the port's factory in place of step_fn and model, a fresh (model, step function,
    {"optimizer": ..., other replay options}) per call. judge: "plain" (the replay as it runs),
    "local" (make_port's port teacher-forced, each step's own error; a failing step goes to the
    float64 arbiter, torch/arbiter.py, and the steps it explains as round-off through a
    discontinuity are accepted; judge/local.py) or "auto" (local for a factory's port on a golden
    longer than LONG_GOLDEN steps, else plain). Where a plain check fails at a step and the port's
    conversions have variants (an LSTM's forget bias, its gate order: judge/variants.py), that
    step is replayed again with each; the model is left as the last of those replays left it.
    TensorFlow 2's verdict also judges the drift
    from the port's own state against an envelope of perturbed replays: not built for PyTorch
    ports yet, and said so in the result."""
    check_arguments("tracekit.torch.check", "(model, step function, {\"optimizer\": ...})", fail_fast, judge,
                    make_port, {"step_fn": step_fn, "model": model, "optimizer": optimizer})
    with (contextlib.nullcontext(golden) if isinstance(golden, Trace) else open_trace(golden)) as trace:
        if make_port is not None:
            locally = judge == "local" or (judge == "auto" and len(trace) > LONG_GOLDEN and "forcing" not in options)
            if locally and out is not None:
                raise UsageError("tracekit.torch.check(judge='local') writes no actual trace (its replays are "
                                 "teacher-forced and one step long): leave out out=, or check with judge='plain'")
            model, step_fn, own = port_made(make_port, options)
            optimizer = own.pop("optimizer", None)
            if locally:
                return _local(trace, lambda: port_made(make_port, options), (model, step_fn, optimizer), tolerance,
                              dict(own, forcing="state"))
            options = own
        conversions, tried = conversions_in(options), settings(model)
        kept = _kept(model, optimizer) if tried or any(conv.variants() for conv in conversions) else None
        result = _plain(trace, step_fn, model, optimizer, tolerance, fail_fast, out, options)
        if kept is not None:
            def rerun(excerpt: Trace, pick: Any) -> Reported:
                undo = pick.apply() if isinstance(pick, Setting) else None
                try:
                    return _plain(excerpt, step_fn, model, kept(), tolerance, True, None, one_step(options, pick))
                finally:
                    if undo is not None:
                        undo()
            name_by_variants(result, trace, conversions, rerun, tried)
        return result


def _kept(model: Any, optimizer: Any) -> Callable[[], Any]:
    """The optimizer(s), their state and the model's put back as they are now, on each call: a
    replay loads the golden's slots into state torch makes at the first step, and reads the state
    an earlier replay left as the port's own start."""
    optimizers = list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer]
    states = [copy.deepcopy(o.state_dict()) for o in optimizers if o is not None]
    weights = copy.deepcopy(model.state_dict()) if model is not None else None

    def restored() -> Any:
        for o, state in zip(optimizers, states):
            o.load_state_dict(copy.deepcopy(state))
        if weights is not None:
            model.load_state_dict(weights)
        return optimizer
    return restored


def _plain(trace: Trace, step_fn: Any, model: Any, optimizer: Any, tolerance: Any, fail_fast: bool,
           out: Optional[str], options: Mapping[str, Any]) -> Reported:
    """The replay compared as it runs, against the tolerance."""
    run = _Run(trace, step_fn, model, optimizer, _options(dict(options, model=model), "tracekit.torch.check"))
    return plain(run.replay, trace, tolerance, fail_fast, out)


def _local(trace: Trace, make_port: Callable[[], Any], port: Any, tolerance: Any,
           options: Dict[str, Any]) -> Reported:
    """The local view: the port teacher-forced, its failing steps arbitrated in float64;
    make_port(): a fresh port with its replay options joined with the caller's (port_made)."""
    model, step_fn, optimizer = port
    forced = _plain(trace, step_fn, model, optimizer, tolerance, False, None, options)
    return local(trace, forced, _arbiter(trace, make_port), "PyTorch")


def _arbiter(trace: Trace, make_port: Callable[[], Any]) -> Arbiter:
    """The float64 arbiter (arbiter.py) of fresh ports from make_port (port_made's)."""
    def replay_one(excerpt: str, model: Any, step: Any, optimizer: Any, own: Dict[str, Any], out: str) -> Trace:
        given = _options(dict(own, model=model, progress=None, forcing="none"), "the float64 arbiter")
        written = _Run(excerpt, step, model, optimizer, given).replay(out).trace
        assert written is not None
        return written
    return lambda step, failing: arbitrate(trace, step, failing, make_port, replay_one)


def _run(golden: Any, port: Tuple[Any, Any, Dict[str, Any]], where: str) -> "_Run":
    """The replay of a port made by a factory: (model, step, {"optimizer": ..., replay options})."""
    model, step_fn, own = port
    own = dict(own)
    optimizer = own.pop("optimizer", None)
    return _Run(golden, step_fn, model, optimizer, _options(dict(own, model=model), where))


def localize(golden: str, make_port: Callable[[], Any], *, tolerance: Any = None, out: Optional[str] = None,
             steps: Optional[int] = None, **options: Any) -> Localization:
    """Find the first step whose own (local) error exceeds the tolerance, and the first tensor
    inside it, and write a one-step reproduction of it, as tracekit.tf2.localize does
    (judge/diagnose.py), for a PyTorch port's factory: make_port() returns a fresh (model, step
    function, {"optimizer": ..., other replay options}). The failing steps of the teacher-forced
    replay go to the float64 arbiter (model.double()); the reproduction's script replays the step
    with tracekit.torch.check."""
    return localize_port(_KIND, golden, make_port, tolerance, out, steps, options)


def calibrate(golden: str, make_port: Callable[[], Any], *, runs: int = 4, margin: float = DEFAULT_MARGIN,
              progress: Optional[Callable[[int, int], None]] = None, **options: Any) -> Calibration:
    """Measure how much this model's training amplifies round-off and return a tolerance that
    covers it, as tracekit.tf2.calibrate does (judge/diagnose.py), for a PyTorch port's factory:
    the port replayed once as it is, then `runs` times from its parameters and buffers moved one
    ulp at random (seeds 0..runs-1)."""
    return calibrate_port(_KIND, golden, make_port, runs, margin, progress, options)


class _Run:
    """One PyTorch replay's parts."""

    def __init__(self, golden: "str | Trace", step_fn: Any, model: Any, optimizer: Any,
                 options: ReplayOptions) -> None:
        check_steps(step_fn)
        if optimizer is None:
            raise UsageError("tracekit.torch needs the port's optimizer: optimizer=<torch.optim.Optimizer> (or a list "
                             "of them)")
        self.golden, self.step_fn, self.model, self.options = golden, step_fn, model, options
        self.optimizers = list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer]

    def replay(self, out: Optional[str], watch: Optional[Callable[[Dict[str, Any]], Sink]] = None,
               stop: Optional[Callable[[], bool]] = None, nudge: Optional[int] = None) -> Replayed:
        refuse_url(out, "write a replay's trace")
        with (contextlib.nullcontext(self.golden) if isinstance(self.golden, Trace)
              else open_trace(self.golden)) as trace:
            runner = TorchRunner(trace, self.options, self.optimizers)
            if self.options.init == "golden":
                runner.load_initial()
            structures = trace.meta.get("inputs")

            def call(index: int, feeds: Dict[str, Any], info: Dict[str, Any]) -> Dict[str, Any]:
                tensors = structured({name: _tensor(value) for name, value in feeds.items()}, structures)
                returned = named(called(step_for(self.step_fn, info, index, trace.path), tensors,
                                        self.options.inputs), _array)
                runner.returned(returned)
                return returned
            meta = {"environment": fingerprint(), "program": port_identity(self.step_fn, self.model),
                    "torch": torch_environment()}
            return replayed(trace, runner, call, self.options, out, watch, stop, meta, nudge)


def _tensor(value: Any) -> Any:
    """A golden input as the port's step takes it: a tensor, or as read where torch has no such
    dtype (strings)."""
    array = np.asarray(value)
    if array.dtype.kind in "biuf":
        return torch.from_numpy(np.array(array))
    return value


def _array(key: str, value: Any) -> np.ndarray:
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


_KIND = PortKind("tracekit.torch", "model", _run, _arbiter)


def torch_environment() -> Dict[str, Any]:
    """What the running PyTorch tells of the numerics: its version, threads, whether oneDNN
    (mkldnn) is used, deterministic algorithms, CUDA."""
    return {"version": torch.__version__, "threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
            "mkldnn": bool(torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "cuda": torch.version.cuda, "devices": torch.cuda.device_count() if torch.cuda.is_available() else 0}
