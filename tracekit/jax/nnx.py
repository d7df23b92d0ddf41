"""A flax NNX port as tracekit.jax replays it: the module and its `nnx.Optimizer` are objects the
port's step updates in place, where the replay holds a state it reads, assigns and hands to a
functional step (tree.py). `nnx_port` makes that state and step from them.

The state is the module's `nnx.Param`s as `params` and its `nnx.BatchStat`s as `batch_stats`
(their paths as the module names them: `hidden/kernel`, `bn/mean`, as flax linen's are), the
optimizer's optax state as `opt_state` and its `tx`. Each call of the step puts the state into
the module and the optimizer, runs the port's own step (an `nnx.jit`ted one is traced again only
when what it is handed changes), and reads both back: so the replay loads, forces and reads an
NNX port as it does a linen one, and the gradients are read where `tx.update` is handed them.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

from flax import nnx, struct

from ..errors import UsageError


@struct.dataclass
class NNXState:
    """An NNX port's state as the replay holds it (pure dicts of arrays, the optax state's own
    structure, the optimizer's update count)."""

    params: Any
    batch_stats: Any
    opt_state: Any
    step: Any
    tx: Any = struct.field(pytree_node=False)


def nnx_port(model: Any, optimizer: Any, step: Callable[..., Any]) -> Tuple[NNXState, Callable[..., Any]]:
    """(state, step function) for tracekit.jax.replay/check of an NNX port: `model` an
    `nnx.Module`, `optimizer` its `nnx.Optimizer` (over its `nnx.Param`s), `step(model, optimizer,
    inputs)` one training step updating both in place and returning the loss or a dict of named
    values. The returned step runs it; each call starts from the state it is handed."""
    if not isinstance(model, nnx.Module):
        raise UsageError("tracekit.jax.nnx_port takes the port's nnx.Module, got %s" % type(model).__name__)
    if not isinstance(optimizer, nnx.Optimizer):
        raise UsageError("tracekit.jax.nnx_port takes the module's nnx.Optimizer, got %s" % type(optimizer).__name__)
    kinds = {type(v).__name__ for _, v in nnx.to_flat_state(nnx.state(model))
             if not isinstance(v, (nnx.Param, nnx.BatchStat, nnx.RngState))}
    if kinds:
        raise UsageError("tracekit.jax.nnx_port: the module holds variables of kinds %s, which the replay neither "
                         "loads nor reads (it takes nnx.Param and nnx.BatchStat)" % ", ".join(sorted(kinds)))

    def read(tx: Any) -> NNXState:
        held = _pure(optimizer, nnx.OptState)
        return NNXState(_pure(model, nnx.Param), _pure(model, nnx.BatchStat), held["opt_state"], held["step"], tx)

    def run(state: NNXState, inputs: Dict[str, Any]) -> Tuple[NNXState, Any]:
        nnx.update(model, _into(model, nnx.Param, state.params))
        if state.batch_stats:
            nnx.update(model, _into(model, nnx.BatchStat, state.batch_stats))
        nnx.update(optimizer, _into(optimizer, nnx.OptState, {"opt_state": state.opt_state, "step": state.step}))
        optimizer.tx = state.tx  # the replay's, which reports what it is handed
        out = step(model, optimizer, inputs)
        return read(state.tx), out

    run.__wrapped__ = step  # type: ignore[attr-defined]  # the port's identity in the report
    return read(optimizer.tx), run


def _pure(node: Any, kind: Any) -> Any:
    return nnx.to_pure_dict(nnx.state(node, kind))


def _into(node: Any, kind: Any, pure: Any) -> Any:
    """`pure` (a dict of arrays) as the State of `node`'s variables of `kind`."""
    state = nnx.state(node, kind)
    nnx.replace_by_pure_dict(state, pure)
    return state
