"""A PyTorch optimizer's state made before its first update, so the golden's initial slots can go
in: torch's own optimizers make it lazily, inside their first step() (fresh_state says what they
make), a hand-written one by one dry step (dry_step); and made anew where an earlier step left
it (restart: a replay's, or the user's training, is no start)."""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Mapping, Optional

import torch


STEP_KEYS = ("step", "t", "count", "iterations")  # where optimizers keep a parameter's step count


def step_key(state: Mapping[str, Any]) -> Optional[str]:
    return next((k for k in STEP_KEYS if k in state), None)


def stepped(optimizer: Any, state: Mapping[str, Any]) -> bool:
    """Whether a parameter's optimizer state has been stepped: its step count is past 0, or it is
    SGD's (made at the first step alone)."""
    key = step_key(state)
    return float(state[key]) > 0 if key is not None else bool(state) and type(optimizer) is torch.optim.SGD


def restart(optimizer: Any, group: Mapping[str, Any], tensor: torch.Tensor, state: Dict[str, Any]) -> bool:
    """A parameter's `state` made as torch's own optimizer makes it at its first step (fresh_state),
    where it is empty or an earlier step left it; whether it is still a stepped one (a hand-written
    optimizer's, which cannot be made anew: the caller loads over it)."""
    was_stepped = bool(state) and stepped(optimizer, state)
    if was_stepped or not state:
        fresh = fresh_state(optimizer, group, tensor)
        if fresh is not None:
            state.clear()
            state.update(fresh)
            return False
    return was_stepped


def fresh_state(optimizer: Any, group: Mapping[str, Any], tensor: torch.Tensor) -> Optional[Dict[str, Any]]:
    """The whole state torch's own optimizer makes for a parameter at its first step (lazily,
    so the golden's initial slots can go in only if it is made first), or in its constructor
    (Adagrad's); None for others."""
    zeros = lambda: torch.zeros_like(tensor, memory_format=torch.preserve_format)  # noqa: E731
    kind = type(optimizer)
    if kind in (torch.optim.Adam, torch.optim.AdamW):
        state = {"step": torch.tensor(0.0), "exp_avg": zeros(), "exp_avg_sq": zeros()}
        if group.get("amsgrad"):
            state["max_exp_avg_sq"] = zeros()
        return state
    if kind is torch.optim.SGD:
        return {"momentum_buffer": zeros()} if group.get("momentum") else {}
    if kind is torch.optim.RMSprop:
        state = {"step": torch.tensor(0.0), "square_avg": zeros()}
        if group.get("momentum"):
            state["momentum_buffer"] = zeros()
        if group.get("centered"):
            state["grad_avg"] = zeros()
        return state
    if kind is torch.optim.Adagrad:  # its constructor's state: the start of one an earlier step left
        return {"step": torch.tensor(0.0),
                "sum": torch.full_like(tensor, group.get("initial_accumulator_value", 0.0),
                                       memory_format=torch.preserve_format)}
    if kind is torch.optim.Adadelta:
        return {"step": torch.tensor(0.0), "square_avg": zeros(), "acc_delta": zeros()}
    return None


@contextlib.contextmanager
def _hooks_off(optimizer: Any) -> Iterator[None]:
    """optimizer.step() without its step hooks (tracekit's own pre-hook among them)."""
    pre, post = optimizer._optimizer_step_pre_hooks, optimizer._optimizer_step_post_hooks
    optimizer._optimizer_step_pre_hooks, optimizer._optimizer_step_post_hooks = type(pre)(), type(post)()
    try:
        yield
    finally:
        optimizer._optimizer_step_pre_hooks, optimizer._optimizer_step_post_hooks = pre, post


def dry_step(optimizer: Any) -> None:
    """Make a hand-written optimizer's state as its own first step does (lazily, inside step()),
    so the golden's can go in before its first update: one step with zero gradients at learning
    rate 0, its parameters and param groups then put back as they were (the slots it made are
    overwritten by the golden's and read back, or left as its own start, said in meta "loaded";
    a count it keeps on itself rather than in its state or groups stays one step on)."""
    groups = optimizer.param_groups
    params = [p for group in groups for p in group["params"]]
    kept = [(p.detach().clone(), p.grad) for p in params]
    settings = [{k: v for k, v in group.items() if k != "params"} for group in groups]
    try:
        for group in groups:
            group["lr"] = 0.0
        for p in params:  # a frozen parameter keeps none, as its real steps give it none
            p.grad = torch.zeros_like(p) if p.requires_grad else None
        with torch.no_grad(), _hooks_off(optimizer):
            optimizer.step()
    finally:
        for group, setting in zip(groups, settings):
            group.update(setting)  # the rate, and any count a group keeps
        with torch.no_grad():
            for p, (value, grad) in zip(params, kept):
                p.copy_(value)
                p.grad = grad
