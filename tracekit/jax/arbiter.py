"""The float64 arbiter, JAX's side: a fresh port's train state cast up to float64 (its
parameters, collections, optax state and hyperparameters; counts and keys as they are) and its
step handed float64 inputs, replaying one step under jax_enable_x64, which judge/arbiter.py
compares and judges. flax's layers compute in their inputs' and parameters' dtype unless told
one (dtype=), so they compute float64 here."""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Tuple

import jax
import jax.numpy as jnp

from ..comparison.arbiter import Arbitration
from ..comparison.stats import Stats
from ..judge.arbiter import arbitrate_step
from ..store import Trace

# (a one-step excerpt's path, a port's train state, step function and replay options, where to write)
# -> its replay of that step, written
ReplayOne = Callable[[str, Any, Any, Dict[str, Any], str], Trace]


def arbitrate(golden: Trace, index: int, failing: Mapping[str, Stats],
              make_port: Callable[[], Tuple[Any, Any, Dict[str, Any]]], replay_one: ReplayOne) -> Arbitration:
    """Judge step `index` of `golden`, whose float32 port fails there on `failing` (key -> stats)."""
    def run_one(excerpt: str, out: str) -> Trace:
        with jax.enable_x64(True):
            state, step, own = make_port()
            return replay_one(excerpt, up(state), _cast_up(step), own, out)
    return arbitrate_step(golden, index, failing, run_one)


def up(tree: Any) -> Any:
    """`tree` with every floating array in float64 (a Python float as it is)."""
    def cast(leaf: Any) -> Any:
        dtype = getattr(leaf, "dtype", None)
        if dtype is not None and jnp.issubdtype(dtype, jnp.floating):
            return jnp.asarray(leaf, dtype=jnp.float64)
        return leaf
    return jax.tree_util.tree_map(cast, tree)


def _cast_up(step: Any) -> Any:
    """The port's step (or each of a dict of them) handed its floating inputs in float64."""
    if isinstance(step, Mapping):
        return {name: _cast_up(function) for name, function in step.items()}

    def step64(state: Any, *args: Any, **keywords: Any) -> Any:
        return step(state, *up(args), **up(keywords))
    return step64
