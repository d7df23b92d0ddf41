"""The port's Keras optimizer during a replay: what it applies, and its slots in TF1 terms.

Keras optimizers' `apply_gradients` (which `minimize` calls) is intercepted for the
length of a step: it reports the gradients applied and the learning rate used; on
the first call it builds the slots, pairs them with the golden's TF1 slots and,
with init="golden", loads the golden's initial slots and iteration count.
`minimize` reports the loss it computes.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import ReplayError
from ..keys import make_key
from .capture import Capture, numpy
from .conversions import Conversion
from .tf_import import tf
from .varmap import Mapping
from .variables import cast_for, unwrap

# Keras slot attributes (new optimizers; legacy ones name their slots by role) for each TF1 slot role.
NEW_OPTIMIZER_SLOTS = {"m": ("_momentums",), "v": ("_velocities",), "vhat": ("_velocity_hats",),
                       "momentum": ("momentums", "_momentums"),  # SGD, RMSprop
                       "rms": ("_velocities",), "accumulator": ("_accumulators",)}

TF1_MOMENTUM = "tf1-momentum"


# tf.train.MomentumOptimizer accumulates gradients and scales by lr when it updates;
# Keras SGD accumulates -lr * gradients. The same state when lr is constant: convert.
def slot_from_tf1(value: np.ndarray, role: str, lr: float) -> np.ndarray:
    return (-lr * value).astype(value.dtype) if role == TF1_MOMENTUM else value


def slot_to_tf1(value: np.ndarray, role: str, lr: float) -> np.ndarray:
    return (-value / lr).astype(value.dtype) if role == TF1_MOMENTUM else value


def _port_grad(conversion: int, variable: int) -> str:
    """The capture's name for a converted port variable's gradient, until it is converted."""
    return "#conversion%d/%d" % (conversion, variable)


def _convention(name: str, role: str) -> str:
    return TF1_MOMENTUM if role == "momentum" and name.endswith("/Momentum:0") else role


def _is_schedule(value: Any) -> bool:
    # tf-keras and Keras 3 each have their own LearningRateSchedule; either may be in use.
    return any(cls.__name__ == "LearningRateSchedule" for cls in type(value).__mro__)


def learning_rate(optimizer: Any) -> Any:
    """The learning rate this update uses (before `iterations` moves on)."""
    if hasattr(optimizer, "_decayed_lr"):  # legacy OptimizerV2
        return optimizer._decayed_lr(tf.float32)
    lr = optimizer._learning_rate
    if _is_schedule(lr):
        return tf.cast(lr(optimizer.iterations), tf.float32)
    return tf.cast(tf.convert_to_tensor(lr), tf.float32)


def _optimizer_modules() -> List[Any]:
    """The Keras optimizer modules a model may use: tf.keras's, and tf-keras and Keras 3 when the
    process imported them (a user's model exists before the replay, so its Keras is imported)."""
    modules = [tf.keras.optimizers]
    for name in ("tf_keras", "keras"):
        package = sys.modules.get(name)
        optimizers = getattr(package, "optimizers", None) if package is not None else None
        if optimizers is not None and all(optimizers is not m for m in modules):
            modules.append(optimizers)
    return modules


def _optimizer_classes(method: str) -> List[Any]:
    """The Keras optimizer classes that define `method` (new and legacy, every Keras in use)."""
    out = []
    for optimizers in _optimizer_modules():
        for cls in (getattr(optimizers, "Optimizer", None),
                    getattr(getattr(optimizers, "legacy", None), "Optimizer", None)):
            if cls is None:
                continue
            for base in cls.__mro__:  # patch where the method is defined
                if method in base.__dict__:
                    if base not in out:
                        out.append(base)
                    break
    return out


def _keras_slot(optimizer: Any, variable: Any, role: str) -> Any:
    if hasattr(optimizer, "get_slot_names"):  # legacy OptimizerV2: slots are named by role
        return optimizer.get_slot(variable, role) if role in optimizer.get_slot_names() else None
    slots = next((getattr(optimizer, a) for a in NEW_OPTIMIZER_SLOTS.get(role, ()) if getattr(optimizer, a, None)),
                 None)
    if hasattr(optimizer, "_get_variable_index"):  # Keras 3
        try:
            index: Optional[int] = optimizer._get_variable_index(variable)
        except KeyError:
            index = None
    else:  # tf-keras' new optimizers
        index = getattr(optimizer, "_index_dict", {}).get(optimizer._var_key(variable))
    if not slots or index is None or index >= len(slots):
        return None
    return slots[index]


class OptimizerBridge:
    """The golden's TF1 optimizer state on one side, the port's Keras optimizer on the other."""

    def __init__(self, golden: Any, mapping: Mapping, slot_names: List[Tuple[str, str, str]],
                 iterations: List[str], keys: Dict[str, str], capture: Capture, load_initial: bool,
                 conversions: Sequence[Conversion] = ()) -> None:
        self.golden = golden
        self.capture = capture
        self._mapping = mapping
        self._slot_names = slot_names  # (golden slot name, golden variable name, role)
        self._iterations = iterations  # golden names of the step counter
        self._keys = keys  # golden state name -> "var/..." or "slot/..."
        self._load_initial = load_initial
        self._by_var = {id(c.obj): name for name, c in mapping.pairs.items()}
        self._conversions = list(conversions)
        for i, conv in enumerate(self._conversions):  # their gradients are converted after the step
            self._by_var.update((id(v), _port_grad(i, j)) for j, v in enumerate(conv.port))
        # (conversion, golden slot names, the port's slot variables, convention) per converted slot role
        self._converted_slots: List[Tuple[Conversion, List[str], List[Any], str]] = []
        self._slots: List[Tuple[str, Any, str]] = []  # golden name, TF2 slot variable, convention
        self._optimizer: Any = None
        self._iteration_var: Any = None

    def read(self) -> List[Tuple[str, np.ndarray]]:
        """("kind/golden name", value) of every mapped slot and the step counter, in TF1 terms."""
        lr = float(self.capture.values.get("lr/learning_rate", 1.0))
        out = [(make_key("slot", name), slot_to_tf1(var.numpy(), role, lr)) for name, var, role in self._slots]
        for conv, names, slots, role in self._converted_slots:
            values = conv.deltas_to_golden([slot_to_tf1(var.numpy(), role, lr) for var in slots])
            out.extend((make_key("slot", name), value) for name, value in zip(names, values))
        if self._iteration_var is not None:
            step = np.asarray(self._iteration_var.numpy(), dtype=np.int64)
            out.extend((self._keys[name], step) for name in self._iterations)
        return out

    def convert_gradients(self, values: Dict[str, np.ndarray]) -> None:
        """After a step: the port's gradients of converted variables, as the golden's."""
        for i, conv in enumerate(self._conversions):
            port = [values.pop(make_key("grad", _port_grad(i, j)), None) for j in range(len(conv.port))]
            if all(g is not None for g in port):
                for name, grad in zip(conv.golden, conv.deltas_to_golden(port)):
                    values[make_key("grad", name)] = grad

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Keras optimizers report to this replay while the context is open."""
        saved: List[Tuple[Any, str, Any]] = []
        try:
            for name, wrap in (("apply_gradients", self._apply_gradients), ("minimize", self._minimize)):
                for cls in _optimizer_classes(name):
                    saved.append((cls, name, cls.__dict__[name]))
                    setattr(cls, name, wrap(cls.__dict__[name]))
            yield
        finally:
            for owner, name, original in reversed(saved):
                setattr(owner, name, original)

    def _apply_gradients(self, original: Callable[..., Any]) -> Callable[..., Any]:
        bridge = self

        def apply_gradients(optimizer: Any, grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
            pairs = list(grads_and_vars)
            bridge._prepare(optimizer, [v for _, v in pairs])
            bridge.capture.put("lr/learning_rate", learning_rate(optimizer))
            for grad, var in pairs:
                name = bridge._by_var.get(id(var)) or bridge._by_var.get(id(unwrap(var)))  # golden or _port_grad
                if grad is not None and name is not None:
                    bridge.capture.put(make_key("grad", name), tf.convert_to_tensor(grad))
            return original(optimizer, pairs, *args, **kwargs)
        return apply_gradients

    def _minimize(self, original: Callable[..., Any]) -> Callable[..., Any]:
        capture = self.capture

        def minimize(optimizer: Any, loss: Any, *args: Any, **kwargs: Any) -> Any:
            if callable(loss):  # the usual Keras form: capture the loss where it is computed
                compute = loss

                def loss() -> Any:
                    value = compute()
                    capture.put("loss/loss", value)
                    return value
            elif loss is not None:
                capture.put("loss/loss", loss)
            return original(optimizer, loss, *args, **kwargs)
        return minimize

    def _prepare(self, optimizer: Any, var_list: List[Any]) -> None:
        """First update: build the slots, map them, and load their initial state."""
        if self._optimizer is optimizer:
            return
        if self._optimizer is not None:
            raise ReplayError("the TF2 step uses more than one optimizer; replay supports one")
        self._optimizer = optimizer
        with tf.init_scope():  # runs once, eagerly, also while a tf.function is traced
            if hasattr(optimizer, "_create_all_weights"):  # legacy (OptimizerV2)
                optimizer._create_all_weights(var_list)
            elif hasattr(optimizer, "build"):
                optimizer.build(var_list)
            self._iteration_var = optimizer.iterations
            self._map_slots(optimizer)
            if self._load_initial:
                initial = self.golden.initial
                lr = float(numpy(learning_rate(optimizer)))
                for name, var, role in self._slots:
                    var.assign(cast_for(slot_from_tf1(initial["slot", name], role, lr), var))
                for conv, names, slots, role in self._converted_slots:
                    golden = [slot_from_tf1(initial["slot", name], role, lr) for name in names]
                    for var, value in zip(slots, conv.deltas_to_port(golden)):
                        var.assign(cast_for(value, var))
                for name in self._iterations:
                    if self._keys[name] in initial:
                        self._iteration_var.assign(int(initial[self._keys[name]]))

    def _map_slots(self, optimizer: Any) -> None:
        """Pair the golden's optimizer slots with the TF2 optimizer's; any golden slot left
        over stops the replay before the first update, listed like the variables."""
        tf2_of = {name: cand.obj for name, cand in self._mapping.pairs.items()}
        converted = {name: (i, k) for i, conv in enumerate(self._conversions) for k, name in enumerate(conv.golden)}
        by_role: Dict[Tuple[int, str], Dict[int, str]] = {}  # (conversion, role) -> golden var index -> slot name
        missing = []
        for name, var_name, role in self._slot_names:
            if var_name in converted:
                i, k = converted[var_name]
                by_role.setdefault((i, role), {})[k] = name
                continue
            variable = tf2_of.get(var_name)
            slot = None if variable is None else _keras_slot(optimizer, variable, role)
            if slot is None:
                missing.append("  only in the golden: %s (%s of %s)" % (name, role, var_name))
            else:
                self._slots.append((name, slot, _convention(name, role)))
        for (i, role), names in by_role.items():
            conv = self._conversions[i]
            slots = [_keras_slot(optimizer, variable, role) for variable in conv.port]
            if len(names) != len(conv.golden) or any(slot is None for slot in slots):
                missing.extend("  only in the golden: %s (%s of %s, converted)" % (n, role, conv.golden[k])
                               for k, n in sorted(names.items()))
            else:
                ordered = [names[k] for k in range(len(conv.golden))]
                self._converted_slots.append((conv, ordered, slots, _convention(ordered[0], role)))
        if missing:
            raise ReplayError(
                "the TF2 optimizer (%s) has no slot for %d of the golden's %d optimizer slots:\n%s\nuse the "
                "optimizer the TF1 code used (AdamOptimizer -> Adam, MomentumOptimizer -> SGD(momentum=...), "
                "RMSPropOptimizer -> RMSprop)" % (type(optimizer).__name__, len(missing), len(self._slot_names),
                                                  "\n".join(missing)))
