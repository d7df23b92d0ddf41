"""The float64 arbiter, PyTorch's side: the fresh port in float64 (`model.double()`: its
parameters and buffers, so its optimizer's state, hold and compute float64, the state its
optimizer's constructor made cast up too; the golden's state and inputs are cast up, exactly)
replaying one step, which judge/arbiter.py compares and judges."""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Tuple

import torch

from ..comparison.arbiter import Arbitration
from ..comparison.stats import Stats
from ..judge.arbiter import arbitrate_step
from ..store import Trace

# (a one-step excerpt's path, a port's model, step function, optimizer(s) and replay options, where to
# write) -> its replay of that step, written
ReplayOne = Callable[[str, Any, Any, Any, Dict[str, Any], str], Trace]


def arbitrate(golden: Trace, index: int, failing: Mapping[str, Stats], make_port: Callable[[], Tuple[Any, Any, Dict[str, Any]]],
              replay_one: ReplayOne) -> Arbitration:
    """Judge step `index` of `golden`, whose float32 port fails there on `failing` (key -> stats)."""
    def run_one(excerpt: str, out: str) -> Trace:
        model, step, own = make_port()
        model.double()  # in place: the optimizer's parameters are the same objects, now float64
        optimizer = own.pop("optimizer", None)
        _state_up(optimizer, model)
        return replay_one(excerpt, model, _cast_up(step), optimizer, own, out)
    return arbitrate_step(golden, index, failing, run_one)


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


