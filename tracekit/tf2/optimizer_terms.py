"""TF1's and TF2's optimizers in each other's terms: what a slot, a setting and a learning rate
are called on either side, and how a slot's value converts. Keras optimizers (new and legacy
tf-keras, Keras 3) and tf.compat.v1.train's, which keep TF1's names and rules. The bridge
(optimizer.py) uses these to pair a port's optimizer with the golden's."""

from __future__ import annotations

from typing import AbstractSet, Any, Dict, List, Optional, Tuple

import numpy as np

from ..replay.slots import Slot
from .capture import numpy
from .tf_import import tf

# Keras slot attributes (new optimizers, tf-keras' and Keras 3's; legacy ones name their slots
# by role) for each slot role.
NEW_OPTIMIZER_SLOTS = {"m": ("_momentums",), "v": ("_velocities",), "vhat": ("_velocity_hats",),
                       "momentum": ("momentums", "_momentums"),  # SGD, RMSprop
                       "rms": ("_velocities",), "mg": ("_average_gradients",), "accumulator": ("_accumulators",),
                       "linear": ("_linears",), "accum_grad": ("_accumulated_grads",),
                       "accum_var": ("_accumulated_delta_vars",)}
# tf.compat.v1.train optimizers' slot names for a role, where they differ from it (FtrlOptimizer
# calls its accumulator "accum", AdadeltaOptimizer its two averages "accum" and "accum_update").
V1_SLOTS = {"accumulator": ("accumulator", "accum"), "accum_grad": ("accum",), "accum_var": ("accum_update",)}

TF1_MOMENTUM = "tf1-momentum"


# tf.train.MomentumOptimizer accumulates gradients and scales by lr when it updates;
# Keras SGD accumulates -lr * gradients. The same state when lr is constant: convert.
def slot_from_tf1(value: np.ndarray, role: str, lr: float) -> np.ndarray:
    return (-lr * value).astype(value.dtype) if role == TF1_MOMENTUM else value


def slot_to_tf1(value: np.ndarray, role: str, lr: float) -> np.ndarray:
    return (-value / lr).astype(value.dtype) if role == TF1_MOMENTUM else value


def applied(optimizer: Any, pairs: List[Tuple[Any, Any]]) -> List[Any]:
    """The gradients the optimizer applies of those it is given: a Keras optimizer set to clip
    (global_clipnorm, clipnorm, clipvalue) clips them in apply_gradients, as TF1 code clips before."""
    grads = [g for g, _ in pairs]
    if is_v1(optimizer) or not any(getattr(optimizer, a, None) for a in ("global_clipnorm", "clipnorm", "clipvalue")):
        return grads
    try:
        if hasattr(optimizer, "_transform_gradients"):  # legacy OptimizerV2: transforms (grad, var) pairs
            return [g for g, _ in optimizer._transform_gradients(list(pairs))]
        return list(optimizer._clip_gradients(grads))
    except Exception:  # an optimizer that clips otherwise: its gradients as given
        return grads


def is_v1(optimizer: Any) -> bool:
    """A tf.compat.v1.train optimizer: TF1's update rules and slots, in TF2."""
    return isinstance(optimizer, tf.compat.v1.train.Optimizer)


def convention(optimizer: Any, slot: Slot) -> str:
    """How the port's slot relates to the golden's: TF1_MOMENTUM where a Keras SGD ports TF1's
    momentum accumulator, else the role (the same quantity)."""
    return TF1_MOMENTUM if slot.tf1_momentum and not is_v1(optimizer) else slot.role


def is_schedule(value: Any) -> bool:
    # tf-keras and Keras 3 each have their own LearningRateSchedule; either may be in use.
    return any(cls.__name__ == "LearningRateSchedule" for cls in type(value).__mro__)


def learning_rate(optimizer: Any) -> Any:
    """The learning rate this update uses (before `iterations` moves on)."""
    if is_v1(optimizer):  # a number, a tensor, or a callable of the caller's step counter
        return tf.cast(tf.convert_to_tensor(optimizer._call_if_callable(optimizer._learning_rate)), tf.float32)
    if hasattr(optimizer, "_decayed_lr"):  # legacy OptimizerV2
        return optimizer._decayed_lr(tf.float32)
    lr = optimizer._learning_rate
    if is_schedule(lr):
        return tf.cast(lr(optimizer.iterations), tf.float32)
    if callable(lr) and not hasattr(lr, "dtype"):  # Keras allows a callable without arguments
        lr = lr()
    return tf.cast(tf.convert_to_tensor(lr), tf.float32)


def keras_slot(optimizer: Any, variable: Any, role: str) -> Any:
    if hasattr(optimizer, "get_slot_names"):  # legacy OptimizerV2 and tf.compat.v1.train: named by role
        names = optimizer.get_slot_names()
        found = [n for n in (V1_SLOTS.get(role, ()) if is_v1(optimizer) else ()) + (role,) if n in names]
        return optimizer.get_slot(variable, found[0]) if found else None
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


# TF1 update ops' hyperparameter arguments -> the port optimizer's setting of it: its Keras config
# key (new, legacy and Keras 3 optimizers agree), and tf.compat.v1.train's attributes.
SETTINGS = {"l1": ("l1_regularization_strength", ("_l1_regularization_strength",)),
            "l2": ("l2_regularization_strength", ("_l2_regularization_strength",)),
            "l2_shrinkage": ("l2_shrinkage_regularization_strength", ("_l2_shrinkage_regularization_strength",)),
            "lr_power": ("learning_rate_power", ("_learning_rate_power",)),
            "beta1": ("beta_1", ("_beta1",)), "beta2": ("beta_2", ("_beta2",)), "epsilon": ("epsilon", ("_epsilon",)),
            "momentum": ("momentum", ("_momentum",)), "rho": ("rho", ("_decay", "_rho")),
            "use_nesterov": ("nesterov", ("_use_nesterov",))}


def settings(optimizer: Any) -> Dict[str, Tuple[str, float]]:
    """TF1 argument -> (the port's name for it, its value) of each hyperparameter the optimizer sets
    to a number."""
    if is_v1(optimizer):
        found = {arg: next(((a, getattr(optimizer, a)) for a in attrs if hasattr(optimizer, a)), None)
                 for arg, (_, attrs) in SETTINGS.items()}
    else:
        try:
            config = optimizer.get_config()
        except Exception:  # a custom optimizer without a config: nothing to compare
            return {}
        found = {arg: (key, config[key]) if key in config else None for arg, (key, _) in SETTINGS.items()}
    out = {}
    for arg, pair in found.items():
        if pair is None:
            continue
        try:
            value = float(numpy(optimizer._call_if_callable(pair[1]) if is_v1(optimizer) else pair[1]))
        except (TypeError, ValueError, AttributeError):
            continue  # a schedule, None (Keras' momentum=None), a callable Keras would call
        out[arg] = (pair[0].lstrip("_"), value)
    return out


# Which TF1 optimizers (by their default names, the prefix of their learning-rate tensors and
# the suffix of their slots) a Keras optimizer class ports.
TF1_NAMES = {"SGD": ("GradientDescent", "Momentum"), "Adam": ("Adam",), "RMSprop": ("RMSProp",),
             "Adagrad": ("Adagrad",), "Ftrl": ("Ftrl",), "Adadelta": ("Adadelta",),
             "GradientDescentOptimizer": ("GradientDescent",), "MomentumOptimizer": ("Momentum",),
             "AdamOptimizer": ("Adam",), "RMSPropOptimizer": ("RMSProp",), "AdagradOptimizer": ("Adagrad",),
             "FtrlOptimizer": ("Ftrl",), "AdadeltaOptimizer": ("Adadelta",),
             "ProximalAdagradOptimizer": ("ProximalAdagrad",)}


def ported_rate(golden: Any, optimizer: Any, updated: AbstractSet[Optional[str]], slot_names: List[str],
                claimed: AbstractSet[str]) -> str:
    """The golden's learning rate a port's optimizer ports: the only one; else the one the TF1
    update ops of the variables it updates (`updated`) read, as recorded; for goldens without
    that record, the one whose TF1 optimizer owns the slots just paired (`slot_names`: their
    names end in its name), else the first not `claimed` (by another optimizer) of a TF1
    optimizer this Keras class ports, else the first unclaimed one."""
    rates = golden.names("lr")
    if len(rates) <= 1:
        return rates[0] if rates else "learning_rate"
    recorded = golden.meta.get("updates")
    if isinstance(recorded, dict):
        read = [fact.get("lr") for var, fact in recorded.items() if var in updated and isinstance(fact, dict)]
        by_update = [r for r in rates if r in read]
        if len(by_update) == 1:
            return by_update[0]
    free = [r for r in rates if r not in claimed]
    owners = {name.rpartition("/")[2][:-2].split("_")[0] for name in slot_names}  # v/Adam_1:0 -> Adam
    kinds = TF1_NAMES.get(type(optimizer).__name__, ())
    by_owner = [r for r in free if owners.intersection(r.split("/")[:-1] or r.split("/"))]
    by_kind = [r for r in free if kinds and any(part.startswith(kinds) for part in r.split("/"))]
    return (by_owner or by_kind or free or rates)[0]
