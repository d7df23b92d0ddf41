"""A PyTorch optimizer as the replay sees it: the gradients it applies and its learning rate,
read as its step begins (a step pre-hook), the gradients before `clip_grad_norm_` clipped them,
and its state paired with the golden's slots by role.

TF1 names a slot by its role (replay/slots.py: Adam's "m" and "v", Momentum's accumulator,
RMSProp's mean square); torch's optimizers, and hand-written ones, keep the same quantities in
`optimizer.state[param]` under names of their own (`exp_avg`, `exp_avg_sq`, `momentum_buffer`,
`square_avg`, `sum`, ...): `STATE_KEYS` says which name holds which role. A momentum that sums
steps rather than gradients converts by the learning rate: Keras SGD's is `-lr` times torch's
momentum_buffer, TF1 RMSProp's `mom` `lr` times it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from ..errors import ReplayError
from ..keys import UNCLIPPED, make_key, split_key
from ..replay.conversions import Conversion
from ..replay.port_state import starts_fresh
from ..replay.slots import STATE_NAMES, Slot, compact, golden_count, names_for, one_value
from .fresh import dry_step, restart, step_key, stepped
from .params import Param

# The golden's slot roles -> the state names that hold them: torch's own first, then the names
# hand-written optimizers give them (replay/slots.py).
STATE_KEYS: Dict[str, Tuple[str, ...]] = {role: own + STATE_NAMES[role] for role, own in {
    "m": ("exp_avg",), "v": ("exp_avg_sq",), "vhat": ("max_exp_avg_sq",), "momentum": ("momentum_buffer",),
    "rms": ("square_avg",), "mg": ("grad_avg",), "accumulator": ("sum",), "accum_grad": ("square_avg",),
    "accum_var": ("acc_delta",)}.items()}

class OptimizerBridge:
    """The port's optimizers, for one replay: `params` golden name -> Param, `slots` the
    golden's slots of them, `iterations` its step counters, `lrs` its learning rates' names."""

    def __init__(self, optimizers: Sequence[Any], params: Dict[str, Param], slots: Sequence[Slot],
                 iterations: Sequence[str], lrs: Sequence[str], grads: Sequence[str], golden: Any,
                 load_initial: bool, conversions: Sequence[Conversion] = ()) -> None:
        for optimizer in optimizers:
            if not isinstance(optimizer, torch.optim.Optimizer):
                raise ReplayError("optimizer= takes torch.optim.Optimizer objects (a hand-written one subclasses "
                                  "it), got %s" % type(optimizer).__name__)
        self.optimizers = list(optimizers)
        self.params = params
        self._golden_of = {id(p.tensor): name for name, p in params.items()}
        self.slots = list(slots)
        self.iterations = list(iterations)
        self.lrs = list(lrs)
        self._grads = set(grads)
        self.golden = golden
        self.load_initial = load_initial
        self.conversions = list(conversions)
        self._converted = {name: conv for conv in self.conversions for name in conv.golden}
        # the golden's slots by (its variable, role): a converted variable's are read and set together
        self._by_role = {(slot.var, slot.role): slot for slot in self.slots}
        self.loaded: Dict[str, bool] = {}  # "slot/<name>" -> loaded before the first update (else its own start)
        self.values: Dict[str, np.ndarray] = {}  # this step's gradients and learning rates
        self.applies: Dict[str, int] = {}  # optimizer class -> steps applied
        self.first_applies: Optional[int] = None  # the optimizers' steps in the replay's first step
        # "slot/<name>" -> the port's own start of a slot the golden's replaced, where TF1's optimizer made it
        self.own_initial: Dict[str, np.ndarray] = {}
        self._fresh_golden = starts_fresh(golden)
        self._dried: set = set()  # ids of the optimizers whose state a dry step made (_dry_step)
        self._loaded_ids: set = set()  # ids of the optimizers the golden's initial state was loaded into
        self._step_lrs: Dict[int, float] = {}  # id(optimizer) -> the learning rate its last step applied
        self._owners: Dict[int, Tuple[Any, Mapping[str, Any]]] = {}  # id(tensor) -> (optimizer, group): _owner
        # ids of the tensors whose state an earlier step left (a replay's, the user's): not read as the
        # port's until the golden's is loaded over it (_load)
        self._stale = {id(tensor) for optimizer in self.optimizers for tensor, state in optimizer.state.items()
                       if stepped(optimizer, state)}
        self._owners_of: Tuple[int, ...] = ()

    def _owner(self, tensor: torch.Tensor) -> Optional[Tuple[Any, Mapping[str, Any]]]:
        """The optimizer and param group holding `tensor`: from a map made once, and again when a
        group was added (add_param_group), not a scan of every group per slot and step."""
        shape = tuple(len(group["params"]) for optimizer in self.optimizers for group in optimizer.param_groups)
        if shape != self._owners_of:
            self._owners = {id(p): (optimizer, group) for optimizer in self.optimizers
                            for group in optimizer.param_groups for p in group["params"]}
            self._owners_of = shape
        return self._owners.get(id(tensor))

    # ---- a step -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def installed(self, first: bool) -> Iterator[None]:
        """For the step's length: each optimizer's step reports its gradients and learning rate
        (and, at the first, loads the golden's initial slots); clip_grad_norm_ reports the
        gradients it is handed."""
        self.values = {}
        before = sum(self.applies.values())
        handles = [o.register_step_pre_hook(self._hook(i, first)) for i, o in enumerate(self.optimizers)]
        utils = torch.nn.utils
        original = utils.clip_grad_norm_

        def clip(parameters: Any, *args: Any, **kwargs: Any) -> Any:
            listed = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
            for tensor in listed:
                name = self._golden_of.get(id(tensor))
                key = make_key("grad", name + UNCLIPPED) if name else None
                if key and name + UNCLIPPED in self._grads and tensor.grad is not None:
                    self.values[key] = self.params[name].to_golden(tensor.grad)
            clipped = {id(tensor) for tensor in listed}
            for conv in self.conversions:
                # every tensor with a gradient among those clipped (a frozen part counts 0)
                if all(id(p.tensor) in clipped or p.tensor.grad is None for p in conv.port):
                    self._converted_grads(conv, UNCLIPPED)
            return original(listed, *args, **kwargs)
        utils.clip_grad_norm_ = clip
        try:
            yield
        finally:
            if self.first_applies is None:
                self.first_applies = sum(self.applies.values()) - before
            utils.clip_grad_norm_ = original
            for handle in handles:
                handle.remove()

    def _hook(self, position: int, first: bool) -> Callable[..., None]:
        def hook(optimizer: Any, args: Any, kwargs: Any) -> None:
            self.applies[type(optimizer).__name__] = self.applies.get(type(optimizer).__name__, 0) + 1
            if first and self.load_initial and id(optimizer) not in self._loaded_ids:
                self._loaded_ids.add(id(optimizer))  # once: a later call may not load over what it computed
                self._load(optimizer)
            for group in optimizer.param_groups:
                for tensor in group["params"]:
                    name = self._golden_of.get(id(tensor))
                    if name is not None and tensor.grad is not None and name in self._grads:
                        self.values[make_key("grad", name)] = self.params[name].to_golden(tensor.grad)
            for conv in self.conversions:
                owner = self._owner(conv.port[0].tensor)
                if owner is not None and owner[0] is optimizer:
                    self._converted_grads(conv, "")
            self._step_lrs[id(optimizer)] = float(optimizer.param_groups[0].get("lr", 0.0))
            lr_name = self._lr_name(position)
            if lr_name is not None and "lr" in optimizer.param_groups[0]:
                lr = optimizer.param_groups[0]["lr"]
                self.values[make_key("lr", lr_name)] = np.asarray(float(lr), dtype=np.float32)
        return hook

    def _converted_grads(self, conv: Conversion, suffix: str) -> None:
        """The gradients of a converted variable's port tensors, rearranged into the golden's
        variables (a frozen part's counts 0), as the golden's gradients named with `suffix`."""
        grads = [p.tensor.grad for p in conv.port]
        if all(g is None for g in grads):
            return
        arrays = [p.to_golden(g) if g is not None else np.zeros(p.shape, p.dtype) for p, g in zip(conv.port, grads)]
        for name, value in zip(conv.golden, conv.deltas_to_golden(arrays)):
            if name + suffix in self._grads:
                self.values[make_key("grad", name + suffix)] = value

    def _lr_name(self, position: int) -> Optional[str]:
        if len(self.lrs) == len(self.optimizers):
            return self.lrs[position]
        return self.lrs[0] if len(self.lrs) == 1 else None

    def _load(self, optimizer: Any) -> None:
        """The golden's initial slots and step count into `optimizer`'s state, made first where
        torch's own optimizer makes it lazily."""
        initial = self.golden.initial
        for slot in self.slots:
            key = make_key("slot", slot.name)
            param = self.params.get(slot.var)
            owner = self._owner(param.tensor) if param is not None else None
            if owner is None or owner[0] is not optimizer or key not in initial:
                continue
            state = optimizer.state[param.tensor]
            left = restart(optimizer, owner[1], param.tensor, state)  # an earlier step's state is no start
            # where the port's optimizer starts, where it is known before its first update: made by its
            # constructor (Adagrad's) or as torch's own makes it (_fresh); a dry step's has been stepped once,
            # and a hand-written optimizer's state stepped before is not known
            known = bool(state) and id(optimizer) not in self._dried and not left
            self._stale.discard(id(param.tensor))
            if not state:
                dry_step(optimizer)
                self._dried.add(id(optimizer))
            golden = initial["slot", slot.name]
            held = self._state_key(state, slot.role)
            if known and held is not None and self._fresh_golden and one_value(golden):
                self.own_initial[key] = compact(self._to_golden(owner[1], param, slot, state[held]))
            self.loaded[key] = self._set(optimizer, owner[1], param, slot, golden)
        for conv in self.conversions:
            owner = self._owner(conv.port[0].tensor)
            if owner is None or owner[0] is not optimizer:
                continue
            for param in conv.port:
                state = optimizer.state[param.tensor]
                self._stale.discard(id(param.tensor))  # the golden's go in below
                if param.tensor.requires_grad:
                    restart(optimizer, owner[1], param.tensor, state)
                    if not state:
                        dry_step(optimizer)
                        self._dried.add(id(optimizer))
            slots = {make_key("slot", slot.name): initial["slot", slot.name] for slot in self.slots
                     if slot.var in conv.golden and make_key("slot", slot.name) in initial}
            set_ = self._set_converted(conv, slots)
            self.loaded.update((key, key in set_) for key in slots)
        counters = {k: initial[split_key(k)] for k in initial.keys()
                    if split_key(k)[1] in self.iterations or k.endswith("beta1_power:0")}
        count = self._golden_count(counters, optimizer)
        if count is not None:
            self._set_count(optimizer, count)

    # ---- state --------------------------------------------------------------------------------

    def _factor(self, group: Mapping[str, Any], slot: Slot) -> float:
        """The golden's slot over torch's state of its role: 1, but for a momentum that sums steps
        rather than gradients: TF1 RMSProp's `mom` (lr x torch's momentum_buffer), Keras SGD's (-lr x
        it), at the learning rate the optimizer's last step applied (a schedule may have moved the
        group's since)."""
        if slot.role != "momentum" or slot.tf1_momentum:
            return 1.0
        rmsprop = "RMSProp" in slot.update or "/RMSProp_1:" in slot.name  # an older golden: by the slot's name
        owner = self._owner(self.params[slot.var].tensor) if slot.var in self.params else None
        lr = self._step_lrs.get(id(owner[0])) if owner is not None else None
        lr = float(group.get("lr", 0.0)) if lr is None else lr
        return lr * (1.0 if rmsprop else -1.0)

    def _to_golden(self, group: Mapping[str, Any], param: Param, slot: Slot, held: torch.Tensor) -> np.ndarray:
        value, factor = param.to_golden(held), self._factor(group, slot)
        return value if factor == 1.0 else (value * factor).astype(value.dtype)

    def _state_key(self, state: Mapping[str, Any], role: str) -> Optional[str]:
        return next((k for k in names_for(role, STATE_KEYS) if isinstance(state.get(k), torch.Tensor)), None)

    def _set(self, optimizer: Any, group: Mapping[str, Any], param: Param, slot: Slot, value: Any) -> bool:
        state = optimizer.state[param.tensor]
        key = self._state_key(state, slot.role)
        if key is None:
            return False
        held, factor = state[key], self._factor(group, slot)
        if factor == 0.0:  # a rate of 0 (a warm-up's first step): the momentum cannot be recovered from it
            return False
        array = np.asarray(value) if factor == 1.0 else np.asarray(value) / factor
        with torch.no_grad():
            held.copy_(param.to_port(array, like=held))
        back = self._to_golden(group, param, slot, held)  # read back: "loaded" is a claim checked as it is made
        if factor != 1.0:  # through a division and back: to its round-off
            return bool(np.allclose(back, np.asarray(value), rtol=1e-6, atol=0))
        return bool(np.array_equal(back, np.asarray(value, dtype=back.dtype)))

    def read(self) -> List[Tuple[str, np.ndarray]]:
        """("slot/<golden name>", value) of every paired slot the port's optimizers hold now, and
        the step count under the golden's counter."""
        out = []
        for slot in self.slots:
            param = self.params.get(slot.var)
            owner = self._owner(param.tensor) if param is not None else None
            if owner is None:
                continue
            state = owner[0].state.get(param.tensor) or {}
            key = self._state_key(state, slot.role)
            if key is None or id(param.tensor) in self._stale:
                continue
            out.append((make_key("slot", slot.name), self._to_golden(owner[1], param, slot, state[key])))
        for conv in self.conversions:
            out.extend(self._read_converted(conv).items())
        count = self._count()
        if count is not None:
            for name in self.iterations:
                kind = "slot" if name in self.golden.names("slot") else "var"
                dtype = next((t.dtype for t in self.golden.catalog if t.name == name), np.int64)
                out.append((make_key(kind, name), np.asarray(count, dtype=dtype)))
        return out

    def _roles(self, conv: Conversion) -> List[str]:
        return sorted({slot.role for slot in self.slots if slot.var in conv.golden})

    def _read_converted(self, conv: Conversion) -> Dict[str, np.ndarray]:
        """{"slot/<name>": value} of a converted variable's slots: each role's state of the port's
        tensors rearranged as the conversion rearranges gradients (a tensor without it, a frozen
        one, counts 0)."""
        owner = self._owner(conv.port[0].tensor)
        if owner is None or any(id(p.tensor) in self._stale for p in conv.port):
            return {}
        out = {}
        for role in self._roles(conv):
            states = [owner[0].state.get(p.tensor) or {} for p in conv.port]
            keys = [self._state_key(state, role) for state in states]
            if all(key is None for key in keys):
                continue
            arrays = [p.to_golden(state[key]) if key is not None else np.zeros(p.shape, p.dtype)
                      for p, state, key in zip(conv.port, states, keys)]
            for name, value in zip(conv.golden, conv.deltas_to_golden(arrays)):
                slot = self._by_role.get((name, role))
                if slot is not None:
                    out[make_key("slot", slot.name)] = value
        return out

    def _set_converted(self, conv: Conversion, values: Mapping[str, Any]) -> List[str]:
        """A converted variable's slots from `values` ("slot/<name>" -> the golden's) into the state of
        the port's tensors, role by role where all of the role's are given; the keys set and read back."""
        owner = self._owner(conv.port[0].tensor)
        if owner is None:
            return []
        done: List[str] = []
        for role in self._roles(conv):
            slots = [self._by_role.get((name, role)) for name in conv.golden]
            keys = [make_key("slot", slot.name) if slot is not None else None for slot in slots]
            if any(key is None or key not in values for key in keys):
                continue
            for param, array in zip(conv.port, conv.deltas_to_port([np.asarray(values[k]) for k in keys])):
                state = owner[0].state.get(param.tensor) or {}
                key = self._state_key(state, role)
                if key is not None:
                    with torch.no_grad():
                        state[key].copy_(param.to_port(array, like=state[key]))
            back = self._read_converted(conv)
            done += [k for k in keys if k in back and np.array_equal(back[k], np.asarray(values[k], back[k].dtype))]
        return done

    def uncounted(self) -> Dict[str, str]:
        """The golden's step counters no port optimizer keeps a count for (torch's SGD keeps none) -> why."""
        if not self.iterations or self._count() is not None:
            return {}
        kinds = {t.name: t.kind for t in self.golden.catalog}
        why = ("the port's optimizer keeps no step count (%s)" % ", ".join(sorted({type(o).__name__
                                                                                for o in self.optimizers})))
        return {make_key(kinds.get(name, "var"), name): why for name in self.iterations}

    def unpaired(self, updated: Sequence[str]) -> List[str]:
        """The golden's slots of `updated` variables the port's optimizers hold no state for."""
        missing = []
        for slot in self.slots:
            param = self.params.get(slot.var)
            owner = self._owner(param.tensor) if param is not None else None
            if slot.var not in updated or owner is None:
                continue
            if self._state_key(owner[0].state.get(param.tensor) or {}, slot.role) is None:
                held = sorted(owner[0].state.get(param.tensor) or {})
                missing.append("%s (%s of %s; %s holds %s)" % (slot.name, slot.role, param.dotted,
                                                              type(owner[0]).__name__, ", ".join(held) or "nothing"))
        for conv in self.conversions:
            read = self._read_converted(conv)
            missing += ["%s (%s of %s, converted: no state of that role in %s)"
                        % (slot.name, slot.role, slot.var, ", ".join(p.dotted for p in conv.port))
                        for slot in self.slots if slot.var in conv.golden and slot.var in updated
                        and make_key("slot", slot.name) not in read]
        return missing

    def _count(self) -> Optional[int]:
        for optimizer in self.optimizers:
            for tensor, state in optimizer.state.items():
                key = step_key(state)
                if key is not None and id(tensor) not in self._stale:
                    return int(float(state[key]))
        return None

    def _golden_count(self, state: Mapping[str, Any], optimizer: Any) -> Optional[int]:
        betas = optimizer.param_groups[0].get("betas") if optimizer.param_groups else None
        return golden_count(state, self.iterations, float(betas[0]) if betas else None)

    def _set_count(self, optimizer: Any, count: int) -> bool:
        """The step count into every parameter's state that keeps one; whether any does."""
        held = False
        for state in optimizer.state.values():
            key = step_key(state)
            if key is None:
                continue
            held = True
            if isinstance(state[key], torch.Tensor):
                state[key].fill_(count)
            else:
                state[key] = type(state[key])(count)
        return held

    def force(self, state: Mapping[str, np.ndarray]) -> List[str]:
        """Teacher forcing: the golden's slots and step count into the port's optimizers."""
        forced = []
        for slot in self.slots:
            key = make_key("slot", slot.name)
            param = self.params.get(slot.var)
            owner = self._owner(param.tensor) if param is not None else None
            if key in state and owner is not None and self._set(owner[0], owner[1], param, slot, state[key]):
                forced.append(key)
        for conv in self.conversions:
            forced += self._set_converted(conv, {key: value for key, value in state.items()
                                                 if split_key(key)[0] == "slot"})
        for optimizer in self.optimizers:
            count = self._golden_count(state, optimizer)
            if count is not None and self._set_count(optimizer, count):
                forced += [k for k in (make_key(kind, n) for n in self.iterations for kind in ("var", "slot"))
                           if k in state]
        return forced
