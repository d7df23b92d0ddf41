"""A JAX port's state as the replay holds it: the train state (flax's TrainState, or any
dataclass pytree with `params`, `opt_state` and `tx`) as a list of leaves, each assignable, and
put back together for the next call of the port's functional step.

The model's variables are the leaves of its collections (the fields holding dicts: `params`,
`batch_stats`, ...), each offered for pairing under the name TF gives its role: flax's `Dense`
`hidden/kernel` is TF's already (flax keeps TF's `(in, out)` and `HWIO` layouts); a norm's
`scale` and `bias` are `gamma` and `beta`, BatchNorm's `mean` and `var` `moving_mean` and
`moving_variance`, `Embed`'s `embedding` `embeddings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ReplayError, UsageError

_STATS = {"mean": "moving_mean", "var": "moving_variance"}
_NORM = {"scale": "gamma", "bias": "beta"}
NOT_COLLECTIONS = frozenset({"opt_state", "tx", "apply_fn", "step"})


def key_name(key: Any) -> str:
    """One step of a pytree path as a name: a dict key, an attribute, an index."""
    for attribute in ("key", "name", "idx"):
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)


def path_names(path: Tuple[Any, ...]) -> Tuple[str, ...]:
    return tuple(key_name(k) for k in path)


class Leaves:
    """The port's state, flattened: `paths` (tuples of names) and `values`, assignable one by
    one, and `state()` the pytree again. The step must return a state of the same structure."""

    def __init__(self, state: Any) -> None:
        flat, self.treedef = jax.tree_util.tree_flatten_with_path(state)
        self.paths: List[Tuple[str, ...]] = [path_names(path) for path, _ in flat]
        self.values: List[Any] = [value for _, value in flat]

    def state(self) -> Any:
        return jax.tree_util.tree_unflatten(self.treedef, self.values)

    def update(self, state: Any, index: int) -> None:
        """The state the port's step returned at step `index`."""
        values, treedef = jax.tree_util.tree_flatten(state)
        if treedef != self.treedef:
            raise ReplayError("step %d: the JAX step returned a state of another structure than it was given (a "
                              "port's step returns (new state, loss or dict of values), the state as its "
                              "apply_gradients/replace made it):\n  given %s\n  returned %s"
                              % (index, self.treedef, treedef))
        self.values = values

    def index(self, path: Tuple[str, ...]) -> Optional[int]:
        try:
            return self.paths.index(path)
        except ValueError:
            return None


@dataclass(eq=False)
class Leaf:
    """One leaf as the golden sees it: `name` TF's (for pairing), `dotted` the port's path."""

    name: str
    dotted: str
    holder: Leaves
    position: int

    framework = "JAX"  # what messages call the port's variables (replay/variables.py)

    @property
    def tensor(self) -> Any:
        return self.holder.values[self.position]

    @property
    def shown(self) -> str:
        return self.dotted if self.name == self.dotted else "%s (as %s)" % (self.dotted, self.name)

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(int(d) for d in np.shape(self.tensor))

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(getattr(self.tensor, "dtype", np.asarray(self.tensor).dtype))

    def to_golden(self, value: Any) -> np.ndarray:
        return np.array(value, copy=True)

    def assign(self, value: Any) -> None:
        array = np.asarray(value)
        if tuple(array.shape) != self.shape:
            raise ReplayError("cannot load %s: the value has shape %s, the port's %s" % (self.shown, array.shape,
                                                                                        self.shape))
        self.holder.values[self.position] = jnp.asarray(array, dtype=self.dtype)

    def numpy(self) -> np.ndarray:
        return np.array(self.tensor, copy=True)


def _tf_name(path: Tuple[str, ...], siblings: Dict[Tuple[str, ...], set]) -> str:
    """TF's name of a collection's leaf (the collection's own name left out); a module is a norm
    where it has a scale, or batch statistics (a BatchNorm without its scale)."""
    collection, rest = path[0], list(path[1:])
    module, last = tuple(rest[:-1]), rest[-1] if rest else path[0]
    if collection == "batch_stats" and last in _STATS:
        last = _STATS[last]
    elif last in _NORM and ("scale" in siblings.get((collection,) + module, set())
                            or "mean" in siblings.get(("batch_stats",) + module, set())):
        last = _NORM[last]
    elif last == "embedding":
        last = "embeddings"
    return "/".join(list(module) + [last])


def check_train_state(state: Any) -> None:
    missing = [name for name in ("params", "opt_state", "tx", "replace") if not hasattr(state, name)]
    if missing:
        raise UsageError("state= takes the port's train state: flax.training.train_state.TrainState (or a subclass "
                         "holding batch_stats and the like), or a dataclass pytree with params, opt_state, tx and "
                         "replace(); got %s, which lacks %s" % (type(state).__name__, ", ".join(missing)))


def model_leaves(leaves: Leaves) -> List[Leaf]:
    """The model's variables: every leaf of the state's collections, under TF's names."""
    siblings: Dict[Tuple[str, ...], set] = {}
    for path in leaves.paths:
        siblings.setdefault(path[:-1], set()).add(path[-1])
    out = []
    for position, path in enumerate(leaves.paths):
        if len(path) < 2 or path[0] in NOT_COLLECTIONS:
            continue  # a field that is one array (a step count, a PRNG key) is no model variable
        if jnp.issubdtype(getattr(leaves.values[position], "dtype", np.float32), jax.dtypes.prng_key):
            continue
        out.append(Leaf(_tf_name(path, siblings), "/".join(path), leaves, position))
    return out
