"""The float64 arbiter, PyTorch's side: one step of a golden replayed with a fresh port in
float64 (`model.double()`: its parameters and buffers, so its optimizer's state, hold and compute
float64, the state its optimizer's constructor made cast up too; the golden's state and inputs are cast up, exactly), from the golden's state before the
step, and compared with it under the arbiter's tolerance (comparison/arbiter.py judges). Where the
float64 port agrees with the golden on every tensor the float32 port fails, the float32 port's
difference is round-off that a discontinuity (a ReLU's kink, a max-pooling tie) carried: the step
is explained. The layers whose decisions flipped are not sought here (TensorFlow's arbiter probes
them): a step the float64 port does not settle counts as the port's."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import replace
from typing import Any, Callable, Dict, Mapping, Tuple

import torch

from ..comparison.arbiter import Arbitration, arbiter_tolerance, golden_before, judge, step_stats, undecided
from ..comparison.downstream import by_update
from ..comparison.engine import compare_data as compare
from ..comparison.stats import Stats
from ..errors import TracekitError
from ..store import Trace
from ..store.excerpt import write_excerpt

# (a one-step excerpt's path, a port's model, step function, optimizer(s) and replay options, where to
# write) -> its replay of that step, written
ReplayOne = Callable[[str, Any, Any, Any, Dict[str, Any], str], Trace]


def arbitrate(golden: Trace, index: int, failing: Mapping[str, Stats], make_port: Callable[[], Tuple[Any, Any, Dict[str, Any]]],
              replay_one: ReplayOne) -> Arbitration:
    """Judge step `index` of `golden`, whose float32 port fails there on `failing` (key -> stats)."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tracekit-arbiter-") as folder:
        excerpt = write_excerpt(golden, index, os.path.join(folder, "step.h5"))
        try:
            model, step, own = make_port()
            model.double()  # in place: the optimizer's parameters are the same objects, now float64
            optimizer = own.pop("optimizer", None)
            _state_up(optimizer, model)
            ran = replay_one(excerpt, model, _cast_up(step), optimizer, own, os.path.join(folder, "float64.h5"))
        except (TracekitError, RuntimeError, TypeError, ValueError) as exc:  # the port cannot compute in float64
            return undecided(index, "the port did not run in float64: %s" % exc, time.perf_counter() - start)
        with ran:
            values = ran.step(0)
            stats = step_stats(compare(excerpt, ran, arbiter_tolerance(), diagnose=False))
            before = golden_before(golden, index)
            stats, updated = by_update(golden.meta, before, golden.step(index), values, stats, arbiter_tolerance())
    verdict = judge(index, failing, stats, (), 0.0, by_update=updated)
    return replace(verdict, seconds=time.perf_counter() - start)


def _up(value: Any) -> Any:
    """A step's inputs with every floating tensor in float64, however nested."""
    if isinstance(value, torch.Tensor):
        return value.double() if value.is_floating_point() else value
    if isinstance(value, Mapping):
        return {k: _up(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_up(v) for v in value)
    return value


def _cast_up(step: Any) -> Any:
    """The port's step (or each of a dict of them, one per train op) handed its floating inputs in float64."""
    if isinstance(step, Mapping):
        return {name: _cast_up(function) for name, function in step.items()}

    def step64(*args: Any, **keywords: Any) -> Any:
        return step(*_up(args), **_up(keywords))
    return step64


def _state_up(optimizer: Any, model: Any) -> None:
    """The optimizer's state its constructor made (Adagrad's accumulator) in float64, as
    model.double() made its parameters: what the port's optimizer makes later is made so."""
    for optimizer_ in optimizer if isinstance(optimizer, (list, tuple)) else [optimizer]:
        for state in getattr(optimizer_, "state", {}).values():
            for key, value in list(state.items()):
                if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dim() > 0:
                    state[key] = value.double()


