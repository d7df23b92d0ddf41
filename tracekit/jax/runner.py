"""The JAX runner: replays a golden through a JAX port's functional step (replay/loop.py's
Runner). It holds the port's train state as leaves (tree.py), pairs the model's with the
golden's variables (replay/variables.py) and its optax state with the golden's slots
(optim.py), loads the initial state, and for each step installs the random tape (tape.py) and
the `tracekit.tap` sink; the drive (drive.py) calls the step on the state put back together.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import replace
from typing import Any, Collection, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import jax
import numpy as np
from jax.experimental import io_callback

from .. import taps
from ..errors import ReplayError, UsageError
from ..keys import make_key, split_key
from ..replay import varmap
from ..replay.conversions import Conversion, carried_conversions
from ..replay.options import ReplayOptions
from ..replay.port_runner import Captured, PortRunner
from ..replay.slots import golden_state, inert_slots
from ..replay.variables import pair_port
from .optim import OptaxBridge, reporting
from .tape import Tape
from .tree import Leaf, Leaves, check_train_state, model_leaves


class JaxRunner(PortRunner):
    """The JAX side of one replay: `state` the port's train state (its tx wrapped to report the
    gradients it is handed)."""

    keeps = "a JAX train state"

    def __init__(self, golden: Any, options: ReplayOptions, state: Any) -> None:
        check_train_state(state)
        self.golden = golden
        split = golden_state(golden, "optax", "JAX")
        self.not_replayed: Dict[str, str] = dict(split.not_replayed)
        # tx reports the gradients it is handed to the bridge, made once the state's leaves are known
        self.leaves = Leaves(state.replace(tx=reporting(state.tx, lambda updates: self.optimizer.took(updates))))
        params = model_leaves(self.leaves)
        var_map, carried = carried_conversions(options.var_map)  # conversions given in the var_map
        paired = pair_port(golden, params, _var_map(var_map, params),
                           _converting(list(options.convert) + carried, params),
                           split.model_names, split.slots, split.iterations, split.keys)
        self.conversions, self.mapping, self.port_state = paired.conversions, paired.mapping, paired.state
        self.not_replayed.update(paired.not_replayed)
        inert = inert_slots(golden, paired.slots)
        self.not_replayed.update((make_key("slot", name), why) for name, why in inert.items())
        slots = [slot for slot in paired.slots if slot.name not in inert]
        mapped = {name: cand.obj for name, cand in self.mapping.pairs.items()}
        self.optimizer = OptaxBridge(self.leaves, mapped, slots, paired.iterations, golden.names("lr"),
                                     golden.names("grad"), golden, self.conversions)
        self.not_replayed.update(self.optimizer.not_compared())
        self.tape = Tape(inject=options.random == "tape")
        self._tap_error: Optional[ReplayError] = None
        self._init_shared()

    def load_initial(self) -> None:
        super().load_initial()
        self.optimizer.load()  # optax made its state with the train state: set before the first step

    # ---- a step -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def step(self, index: int, draws: List[Tuple[str, np.ndarray]], first: bool, full: bool = True,
             counters: Mapping[str, int] = {}, digested: Collection[str] = ()) -> Iterator[Captured]:
        self._step_index = index
        self._unfed_reads(index, counters)
        self._captured = captured = Captured()
        self.tape.start(index, draws)
        self.optimizer.start(index)
        with self.tape.installed(), taps.capturing(self._tap):
            yield captured
            jax.effects_barrier()  # the step's callbacks (draws, gradients) have run
        self.optimizer.finish()
        captured.values.update(self.optimizer.values)
        captured.draws = list(self.tape.taken)
        if not full:
            captured.values = {k: v for k, v in captured.values.items() if split_key(k)[0] in ("loss", "lr")}

    def check_step(self, index: int, updated: Sequence[str]) -> None:
        error, self._tap_error = self._tap_error, None
        if error is not None:
            raise error
        self.tape.check(index)
        if index == 0:
            if not self.optimizer.applies:
                raise ReplayError("step 0: the port's optimizer took no step (the step must apply its gradients "
                                  "through the train state's tx: state.apply_gradients(grads=...), or "
                                  "state.tx.update)")
            unpaired = self.optimizer.unpaired(list(updated))
            if unpaired:
                raise ReplayError("step %d: the golden's optimizer state has no counterpart in the port's optax "
                                  "state (tracekit pairs them by role: mu/nu, trace, sum_of_squares, ...):\n  %s"
                                  % (index, "\n  ".join(unpaired)))
            for name in self.golden.names("grad"):
                key = make_key("grad", name)
                if self.optimizer.clipping and key not in self._captured.values:
                    self.not_replayed.setdefault(key, self.optimizer.clip_reason)  # the kind tx is not handed
                if key not in self._captured.values and key not in self.not_replayed:
                    self.not_replayed[key] = "the port's optimizer was handed no gradient for it"

    def _tap(self, name: str, tensor: Any) -> Any:
        """tracekit.tap in the port's step: its value kept (inside a jitted step, handed out by an
        ordered callback as the step runs) and, under forcing="taps", the golden's value forward
        with the port's gradient backward."""
        if not isinstance(tensor, jax.Array):
            return tensor
        traced = isinstance(tensor, jax.core.Tracer)
        if traced:
            jax.debug.callback(functools.partial(self._took_tap, name), tensor, ordered=True)
        else:
            self._took_tap(name, tensor)
        if self._forced_taps is None:
            return tensor
        shape, dtype = tuple(tensor.shape), tensor.dtype
        if traced:
            golden = io_callback(functools.partial(self._golden_tap, name, shape, dtype),
                                 jax.ShapeDtypeStruct(shape, dtype), ordered=True)
        else:
            golden = jax.numpy.asarray(self._golden_tap(name, shape, dtype))
        return golden + (tensor - jax.lax.stop_gradient(tensor))

    def _took_tap(self, name: str, value: Any) -> None:
        self._captured.values[make_key("tap", name)] = np.array(value, copy=True)

    def _golden_tap(self, name: str, shape: Tuple[int, ...], dtype: Any) -> np.ndarray:
        """The golden's value of tap `name` at this step (an error is kept, raised after the step)."""
        value = (self._forced_taps or {}).get(name)
        if value is None or tuple(np.shape(value)) != shape:
            self._tap_error = self._tap_error or ReplayError(
                "forcing='taps': the port taps %r at step %d as %s; the golden holds %s there"
                % (name, self._step_index, shape, "no such tap" if value is None else tuple(np.shape(value))))
            return np.zeros(shape, dtype)
        return np.asarray(value, dtype=dtype)

    def meta(self) -> Dict[str, Any]:
        decided = self.optimizer.clipping and self.optimizer.clip_kind is not None
        return {"own_initial": sorted(self._own_named.union(self.optimizer.own_initial)),
                "applies": self.optimizer.applies, "counter_reads": dict(self._counter_reads),
                "notes": [self.optimizer.clip_reason] if decided else [],
                "reshaped_draws": dict(self.tape.reshaped), "draw_rates": dict(self.tape.rates),
                "loaded": {"read_back": sorted(k for k, ok in self.optimizer.loaded.items() if ok),
                           "otherwise": sorted(k for k, ok in self.optimizer.loaded.items() if not ok)}}


def _var_map(var_map: Any, leaves: Sequence[Leaf]) -> Any:
    """The var_map with the port's paths (`params/hidden/kernel`), or TF's names for them, as
    targets turned into the leaves pairing sees."""
    if var_map in (None, "auto"):
        return var_map
    by_path = {leaf.dotted: leaf for leaf in leaves}
    by_name = {varmap.parts(leaf.name): leaf for leaf in leaves}

    def target(value: Any) -> Any:
        if isinstance(value, str):
            return by_path.get(value) or by_name.get(varmap.parts(value)) or value
        return value
    if isinstance(var_map, dict):
        return {name: target(value) for name, value in var_map.items()}
    return lambda name: target(varmap.explicit_target(var_map, name))


def _converting(convert: Sequence[Conversion], leaves: Sequence[Leaf]) -> List[Conversion]:
    """The conversions with the port's leaves, named by their paths (jax/conversions.py), in
    place of the paths."""
    by_path = {leaf.dotted: leaf for leaf in leaves}
    out = []
    for conv in convert:
        missing = [p for p in conv.port if isinstance(p, str) and p not in by_path]
        if missing:
            near = sorted(path for path in by_path if path.rsplit("/", 2)[0] in {m.rsplit("/", 2)[0] for m in missing})
            raise UsageError("conversion %s names the port's %s, which the train state does not hold (its leaves: %s)"
                             % (conv.describe, ", ".join(missing), ", ".join(near or sorted(by_path)[:8])))
        out.append(replace(conv, port=tuple(by_path[p] if isinstance(p, str) else p for p in conv.port)))
    return out

