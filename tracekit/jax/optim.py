"""An optax optimizer as the replay sees it: the gradients it is handed, its learning rate, and
its state paired with the golden's slots by role.

optax keeps a transformation's state beside the parameters' tree (`mu` and `nu` of
scale_by_adam, `trace` of momentum, `sum_of_squares` of Adagrad, ...): a leaf of the port's
`opt_state` whose path ends with a parameter's path holds that parameter's state of the role its
field names (ROLES). `count` leaves hold the step count, `hyperparams` (optax.inject_hyperparams)
the learning rate. The gradients are read where the train state's `tx.update` is handed them:
tracekit wraps `tx` for the replay, and a jax.debug.callback hands them out of a jitted step.
A momentum that sums steps rather than gradients converts by the learning rate: Keras SGD's is
`-lr` times optax's trace, TF1 RMSProp's `mom` `lr` times it.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import jax
import numpy as np

from ..errors import UsageError
from ..keys import UNCLIPPED, make_key, split_key
from ..replay.conversions import Conversion
from ..replay.port_state import starts_fresh
from ..replay.slots import STATE_NAMES, Slot, compact, golden_count, names_for, one_value
from .tree import Leaf, Leaves, path_names

# The golden's slot roles -> optax's fields that hold them, then hand-written names.
ROLES: Dict[str, Tuple[str, ...]] = {role: own + STATE_NAMES[role] for role, own in {
    "m": ("mu",), "v": ("nu",), "vhat": ("nu_max",), "momentum": ("trace",), "rms": ("nu",), "mg": ("mu",),
    "accumulator": ("sum_of_squares",), "accum_grad": ("e_g",), "accum_var": ("e_x",)}.items()}
COUNTS = ("count", "step")


def reporting(tx: Any, sink: Callable[[Any], None]) -> Any:
    """`tx` handing sink() the gradients its update is given, jitted or not (a jax.debug.callback)."""
    if not hasattr(tx, "update") or not hasattr(tx, "_replace"):
        raise UsageError("the train state's tx must be an optax GradientTransformation, got %s" % type(tx).__name__)
    original = tx.update

    def update(updates: Any, state: Any, params: Any = None, **extra: Any) -> Any:
        jax.debug.callback(sink, updates, ordered=True)
        return original(updates, state, params, **extra)
    return tx._replace(update=update)


class OptaxBridge:
    """The port's optax transformation, for one replay: `params` golden name -> Leaf of the
    state's `params`, `slots` the golden's slots of them, `iterations` its step counters."""

    def __init__(self, leaves: Leaves, params: Dict[str, Leaf], slots: Sequence[Slot], iterations: Sequence[str],
                 lrs: Sequence[str], grads: Sequence[str], golden: Any, conversions: Sequence[Conversion] = ()) -> None:
        self.leaves, self.params, self.golden = leaves, params, golden
        self.conversions = list(conversions)
        self.slots, self.iterations, self.lrs = list(slots), list(iterations), list(lrs)
        self._grads = set(grads)
        # the golden keeps clipped gradients and the unclipped ones; tx.update is handed what the step passes it,
        # clipped or not, and a chain clips inside: which, their global norm tells where TF1's clip acts (_which)
        self.clipping = any(name.endswith(UNCLIPPED) for name in grads)
        self.clip_kind: Optional[str] = None  # UNCLIPPED or "" (the clipped ones): what tx is handed, once told
        self.clip_reason = ("the golden clipped its gradients; tracekit reads those the port's tx is handed, before "
                            "any clipping inside its optax chain and after any the step did itself, and TF1's clip "
                            "did not act before this was decided")
        self._index = -1
        self._grad_name = {leaf.holder.paths[leaf.position][1:]: name for name, leaf in params.items()
                           if leaf.holder.paths[leaf.position][0] == "params"}
        optimizer = [i for i, path in enumerate(leaves.paths) if path[0] == "opt_state"]
        self._counts = [i for i in optimizer if leaves.paths[i][-1] in COUNTS and "hyperparams" not in leaves.paths[i]]
        self._counts += [i for i, path in enumerate(leaves.paths) if path == ("step",)]  # TrainState's own
        hyper = {leaves.paths[i][-1]: i for i in optimizer if "hyperparams" in leaves.paths[i][:-1]}
        self._lr = hyper.get("learning_rate", hyper.get("lr"))
        self._b1 = hyper.get("b1")
        # (the field a state leaf is under, the parameter path after it) -> its position: one pass over the state
        self._state_at: Dict[Tuple[str, Tuple[str, ...]], int] = {}
        for i in optimizer:
            path = leaves.paths[i]
            for cut in range(1, len(path)):
                self._state_at.setdefault((path[cut - 1], path[cut:]), i)
        self.slot_leaf: Dict[str, int] = {}  # golden slot name -> position of the leaf holding it
        for slot in self.slots:
            found = self._find(self.params.get(slot.var), slot.role)
            if found is not None:
                self.slot_leaf[slot.name] = found
        # a converted variable's slots, role by role: the golden's slot of each of its variables, and the
        # positions of the port leaves' state of that role (all of them, or none)
        self._by_role = {(slot.var, slot.role): slot for slot in self.slots}
        self.converted_slots: List[Tuple[Conversion, List[Optional[Slot]], Optional[List[int]]]] = []
        for conv in self.conversions:
            for role in sorted({slot.role for slot in self.slots if slot.var in conv.golden}):
                found = [self._find(leaf, role) for leaf in conv.port]
                self.converted_slots.append((conv, [self._by_role.get((n, role)) for n in conv.golden],
                                             None if None in found else [int(i) for i in found if i is not None]))
        self.values: Dict[str, np.ndarray] = {}  # this step's gradients and learning rate
        self.applies = 0
        self.own_initial: Dict[str, np.ndarray] = {}
        self.loaded: Dict[str, bool] = {}

    def _find(self, leaf: Optional[Leaf], role: str) -> Optional[int]:
        """The position of the optax state of `role` that `leaf` (a parameter) has."""
        if leaf is None:
            return None
        tail = self.leaves.paths[leaf.position][1:]
        return next((self._state_at[name, tail] for name in names_for(role, ROLES) if (name, tail) in self._state_at),
                    None)

    # ---- a step -------------------------------------------------------------------------------

    def took(self, updates: Any) -> None:
        """What the port's tx.update was handed (reporting()): its gradients, the golden's clipped or
        unclipped ones where it clipped (as _which told at step 0)."""
        self.applies += 1
        handed = {path_names(path): value for path, value in jax.tree_util.tree_flatten_with_path(updates)[0]}
        grads: Dict[str, np.ndarray] = {}
        for path, value in handed.items():
            name = self._grad_name.get(path)
            if name is not None:
                grads[name] = np.array(value, copy=True)
        for conv in self.conversions:  # rearranged into the golden's variables (a part handed none counts 0)
            tails = [leaf.holder.paths[leaf.position][1:] for leaf in conv.port]
            if any(tail in handed for tail in tails):
                arrays = [np.asarray(handed[tail]) if tail in handed else np.zeros(leaf.shape, leaf.dtype)
                          for tail, leaf in zip(tails, conv.port)]
                grads.update(zip(conv.golden, conv.deltas_to_golden(arrays)))
        if self.clipping and self.clip_kind is None:
            self.clip_kind = self._which(grads)
        # until TF1's clip acts, its clipped and unclipped gradients are the same: compared with both
        suffixes = ("", UNCLIPPED) if self.clipping and self.clip_kind is None else (self.clip_kind or "",)
        for name, value in grads.items():
            for suffix in suffixes:
                if name + suffix in self._grads:
                    self.values[make_key("grad", name + suffix)] = value

    def _which(self, grads: Mapping[str, np.ndarray]) -> Optional[str]:
        """Whether tx is handed the golden's unclipped gradients (a clip inside the optax chain:
        UNCLIPPED) or its clipped ones (the step clipped: ""), told at the first step where TF1's
        clip acted by their global norm, the nearer (by ratio) of the golden's two there; None at a
        step where it did not (both norms alike). clip_reason says what was found."""
        step = self.golden.step(self._index)
        names = [n for n in grads if make_key("grad", n) in step and make_key("grad", n + UNCLIPPED) in step]
        if not names:
            return None

        def norm(values: Sequence[Any]) -> float:
            return float(np.sqrt(sum(float(np.sum(np.square(np.asarray(v, np.float64)))) for v in values)))
        port, clipped = norm([grads[n] for n in names]), norm([step["grad", n] for n in names])
        unclipped = norm([step["grad", n + UNCLIPPED] for n in names])
        if not (port > 0 and clipped > 0 and unclipped > clipped * (1 + 1e-4)):
            return None
        before = abs(np.log(port / unclipped)) < abs(np.log(port / clipped))
        self.clip_reason = ("the port's tx is handed gradients of global norm %.6g at step %d, where TF1's clip "
                            "acted first: the golden's %s clipping (%.6g; %s %.6g), compared with those from that step "
                            "on; the %s ones are %s, where tracekit does not see them"
                            % (port, self._index, "before" if before else "after", unclipped if before else clipped,
                               "after" if before else "before", clipped if before else unclipped,
                               "clipped" if before else "unclipped", "made inside the port's optax chain" if before
                               else "the step's own, before it hands tx the clipped ones"))
        return UNCLIPPED if before else ""

    def start(self, index: int = -1) -> None:
        self._index = index
        self.values = {}

    def finish(self) -> None:
        """After the step: its learning rate, as the transformation's hyperparameters hold it."""
        if self._lr is not None and len(self.lrs) == 1:
            self.values[make_key("lr", self.lrs[0])] = np.asarray(float(np.asarray(self.leaves.values[self._lr])),
                                                                  dtype=np.float32)

    def not_compared(self) -> Dict[str, str]:
        """What of the golden's optimizer this port's state cannot show -> why."""
        out: Dict[str, str] = {}
        if self.lrs and self._lr is None:
            out.update((make_key("lr", n), "the port's optax transformation keeps no learning rate in its state "
                        "(wrap it in optax.inject_hyperparams to compare it)") for n in self.lrs)
        if self.iterations and not self._counts:
            out.update((make_key(k, n), "the port's optax state keeps no step count") for n in self.iterations
                       for k in ("var", "slot") if n in self.golden.names(k))
        for slot in self.slots:
            if slot.name in self.slot_leaf and self._factor(slot) is None:
                out[make_key("slot", slot.name)] = ("a momentum kept as a sum of steps converts by the learning rate, "
                                                    "which the port's optax state does not keep (wrap it in "
                                                    "optax.inject_hyperparams to compare it)")
        return out

    # ---- state --------------------------------------------------------------------------------

    def _factor(self, slot: Slot) -> Optional[float]:
        """The golden's slot over optax's state of its role: 1, but for a momentum that sums steps
        (TF1 RMSProp's `mom`: lr x optax's trace; Keras SGD's: -lr x it); None where the rate is
        not kept."""
        if slot.role != "momentum" or slot.tf1_momentum:
            return 1.0
        if self._lr is None:
            return None
        lr = float(np.asarray(self.leaves.values[self._lr]))
        return lr * (1.0 if "RMSProp" in slot.update or "/RMSProp_1:" in slot.name else -1.0)

    def read(self) -> List[Tuple[str, np.ndarray]]:
        out = []
        for slot in self.slots:
            position, factor = self.slot_leaf.get(slot.name), self._factor(slot)
            if position is None or factor is None:
                continue
            value = np.array(self.leaves.values[position], copy=True)
            out.append((make_key("slot", slot.name), value if factor == 1.0 else (value * factor).astype(value.dtype)))
        out.extend(self._read_converted().items())
        count = self.count()
        if count is not None:
            for name in self.iterations:
                kind = "slot" if name in self.golden.names("slot") else "var"
                dtype = next((t.dtype for t in self.golden.catalog if t.name == name), np.int64)
                out.append((make_key(kind, name), np.asarray(count, dtype=dtype)))
        return out

    def _read_converted(self) -> Dict[str, np.ndarray]:
        """{"slot/<name>": value} of the converted variables' slots, rearranged as their gradients are."""
        out = {}
        for conv, slots, positions in self.converted_slots:
            if positions is None:
                continue
            values = conv.deltas_to_golden([np.asarray(self.leaves.values[i]) for i in positions])
            out.update((make_key("slot", slot.name), value) for slot, value in zip(slots, values) if slot is not None)
        return out

    def _set_converted(self, values: Mapping[str, Any]) -> List[str]:
        """The converted variables' slots from `values` ("slot/<name>" -> the golden's), role by role
        where all of the role's are given; the keys set and read back."""
        done: List[str] = []
        for conv, slots, positions in self.converted_slots:
            keys = [make_key("slot", slot.name) if slot is not None else None for slot in slots]
            if positions is None or any(key is None or key not in values for key in keys):
                continue
            for position, array in zip(positions, conv.deltas_to_port([np.asarray(values[k]) for k in keys])):
                held = self.leaves.values[position]
                self.leaves.values[position] = jax.numpy.asarray(array, dtype=held.dtype)
            back = self._read_converted()
            done += [k for k in keys if k in back and np.array_equal(back[k], np.asarray(values[k], back[k].dtype))]
        return done

    def count(self) -> Optional[int]:
        return int(np.asarray(self.leaves.values[self._counts[0]])) if self._counts else None

    def _set(self, slot: Slot, value: Any) -> bool:
        """The golden's value of `slot` into the port's leaf; whether it reads back as given."""
        position, factor = self.slot_leaf.get(slot.name), self._factor(slot)
        if position is None or not factor:
            return False
        held = self.leaves.values[position]
        array = np.asarray(value, dtype=np.float64) / factor
        self.leaves.values[position] = jax.numpy.asarray(array, dtype=held.dtype)
        back = np.asarray(self.leaves.values[position]) * factor
        if factor != 1.0:
            return bool(np.allclose(back, np.asarray(value), rtol=1e-6, atol=0))
        return bool(np.array_equal(back.astype(np.asarray(value).dtype), np.asarray(value)))

    def _set_count(self, count: int) -> None:
        for position in self._counts:
            held = self.leaves.values[position]
            self.leaves.values[position] = jax.numpy.asarray(count, dtype=getattr(held, "dtype", np.int32))

    def _golden_count(self, state: Mapping[str, Any]) -> Optional[int]:
        b1 = float(np.asarray(self.leaves.values[self._b1])) if self._b1 is not None else None
        return golden_count(state, self.iterations, b1)

    def load(self) -> None:
        """The golden's initial slots and step count into the port's state (optax made its state
        when the train state was created: its own start of a slot the golden's optimizer made
        fresh is kept for own_initial)."""
        initial = self.golden.initial
        fresh = starts_fresh(self.golden)
        for slot in self.slots:
            key = make_key("slot", slot.name)
            if key not in initial or slot.name not in self.slot_leaf:
                continue
            golden = initial["slot", slot.name]
            factor = self._factor(slot)
            if fresh and one_value(golden) and factor:
                own = np.asarray(self.leaves.values[self.slot_leaf[slot.name]]) * factor
                self.own_initial[key] = compact(own.astype(np.asarray(golden).dtype))
            self.loaded[key] = self._set(slot, golden)
        given = {make_key("slot", slot.name): initial["slot", slot.name] for _, slots, _ in self.converted_slots
                 for slot in slots if slot is not None and make_key("slot", slot.name) in initial}
        set_ = self._set_converted(given)
        self.loaded.update((key, key in set_) for key in given)
        counters = {k: initial[split_key(k)] for k in initial.keys()
                    if split_key(k)[1] in self.iterations or k.endswith("beta1_power:0")}
        count = self._golden_count(counters)
        if count is not None:
            self._set_count(count)

    def force(self, state: Mapping[str, np.ndarray]) -> List[str]:
        """Teacher forcing: the golden's slots and step count into the port's state."""
        forced = [make_key("slot", slot.name) for slot in self.slots
                  if make_key("slot", slot.name) in state and self._set(slot, state[make_key("slot", slot.name)])]
        forced += self._set_converted({k: v for k, v in state.items() if split_key(k)[0] == "slot"})
        count = self._golden_count(state)
        if count is not None and self._counts:
            self._set_count(count)
            forced += [k for k in (make_key(kind, n) for n in self.iterations for kind in ("var", "slot")) if k in state]
        return forced

    def unpaired(self, updated: Sequence[str]) -> List[str]:
        """The golden's slots of `updated` variables the port's optax state holds nothing for."""
        missing = ["%s (%s of %s; looked for %s)" % (slot.name, slot.role, self.params[slot.var].dotted,
                                                    " or ".join(names_for(slot.role, ROLES)))
                   for slot in self.slots if slot.var in updated and slot.var in self.params
                   and slot.name not in self.slot_leaf]
        return missing + ["%s (%s of %s, converted: no state of that role for each of %s)"
                          % (slot.name, slot.role, slot.var, ", ".join(leaf.dotted for leaf in conv.port))
                          for conv, slots, positions in self.converted_slots if positions is None
                          for slot in slots if slot is not None and slot.var in updated]
