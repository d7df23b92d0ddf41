"""The golden's optimizer state in the terms of Keras' optimizers. No TensorFlow here.

Optimizer state is matched by (variable, role): TF1 `v/Adam` and `v/Adam_1` are Adam's
m and v, `v/Momentum` is the momentum accumulator, TF1 Keras names `training/Adam/v/m`;
`global_step` is the optimizer's `iterations`. TF1 Adam's beta powers have no Keras
counterpart (Keras derives them from `iterations`). Where the golden records what each slot
was to its update op (meta["slots"]), that decides; older goldens are read by slot names.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..keys import BEFORE, make_key

_TF1_SLOTS = [
    (re.compile(r"^(?P<var>.+)/Adam_1:0$"), "v"),
    (re.compile(r"^(?P<var>.+)/Adam:0$"), "m"),
    (re.compile(r"^(?P<var>.+)/Momentum:0$"), "momentum"),
    (re.compile(r"^(?P<var>.+)/RMSProp_1:0$"), "momentum"),
    (re.compile(r"^(?P<var>.+)/RMSProp:0$"), "rms"),
    (re.compile(r"^(?P<var>.+)/(Proximal)?Adagrad:0$"), "accumulator"),
    (re.compile(r"^(?P<var>.+)/Ftrl_1:0$"), "linear"),
    (re.compile(r"^(?P<var>.+)/Ftrl:0$"), "accumulator"),
    (re.compile(r"^(?P<var>.+)/Adadelta_1:0$"), "accum_var"),
    (re.compile(r"^(?P<var>.+)/Adadelta:0$"), "accum_grad"),
    (re.compile(r"^training/[^/]+/(?P<var>.+)/(?P<role>m|v|vhat|momentum|rms|mg|accumulator|linear|accum_grad|"
                r"accum_var):0$"), None),
]
ITERATIONS = ("global_step:0",)
NO_COUNTERPART = re.compile(r"^(.*/)?(beta1_power|beta2_power)(_\d+)?:0$|^training/[^/]+/"
                            r"(beta_1|beta_2|decay|learning_rate|epsilon|momentum|rho|iter|iterations):0$")


def parse_slot(name: str) -> Optional[Tuple[str, str]]:
    """(variable name, role) of a TF1 optimizer slot name, or None."""
    for pattern, role in _TF1_SLOTS:
        found = pattern.match(name)
        if found:
            return found.group("var") + ":0", role or found.group("role")
    return None


@dataclass(frozen=True)
class Slot:
    """A golden optimizer slot: its variable, its role in the terms of Keras' legacy optimizers'
    slot names ("m", "v", "momentum", "rms", "mg", "accumulator", "linear", "accum_grad",
    "accum_var", ...), whether it holds TF1 MomentumOptimizer's accumulator (the sum of
    gradients, where Keras SGD keeps the sum of steps), and the TF1 update op that used it."""

    name: str
    var: str
    role: str
    tf1_momentum: bool = False
    update: str = ""


# TF1 update ops' slot arguments -> Keras roles. "accum" is a momentum in Momentum updates and
# Adadelta's squared-gradient average; "accum_update" is Adadelta's squared-step average.
_ARG_ROLES = {"m": "m", "v": "v", "vhat": "vhat", "ms": "rms", "mom": "momentum", "mg": "mg", "linear": "linear",
              "accum_update": "accum_var"}
_TF1_MOMENTUM_UPDATES = re.compile(r"^(Resource)?(Sparse)?ApplyMomentum$")


def _recorded_slot(name: str, recorded: Dict[str, Any]) -> Optional[Slot]:
    """A slot as the recorder saw it: the update op that used it, and as which argument."""
    var, update, arg = recorded.get("var"), str(recorded.get("update", "")), recorded.get("arg")
    if not isinstance(var, str) or not isinstance(arg, str):
        return None
    if arg == "accum":
        role = "momentum" if "Momentum" in update else "accum_grad" if "Adadelta" in update else "accumulator"
    else:
        role = _ARG_ROLES.get(arg, arg)
    return Slot(name, var, role, role == "momentum" and bool(_TF1_MOMENTUM_UPDATES.match(update)), update)


def split_state(names: Sequence[str], recorded: Optional[Dict[str, Any]] = None
                ) -> Tuple[List[str], List[Slot], List[str], List[str]]:
    """Golden var/slot names -> (model variables, slots, the iterations counter, optimizer
    state without a TF2 counterpart). `recorded`: the golden's meta["slots"], what each slot
    was to its update op; goldens without it are read by slot names (v/Adam, v/Momentum, ...)."""
    model: List[str] = []
    slots: List[Slot] = []
    iterations: List[str] = []
    orphans: List[str] = []
    for name in names:
        entry = (recorded or {}).get(name)
        found = _recorded_slot(name, entry) if isinstance(entry, dict) else None
        if found is None:
            parsed = parse_slot(name)
            found = None if parsed is None else Slot(name, parsed[0], parsed[1],
                                                     parsed[1] == "momentum" and name.endswith("/Momentum:0"))
        if name in ITERATIONS or re.match(r"^training/[^/]+/iter(ations)?:0$", name):
            iterations.append(name)
        elif found is not None:
            slots.append(found)
        elif NO_COUNTERPART.match(name):
            orphans.append(name)
        else:
            model.append(name)
    return model, slots, iterations, orphans


# TF1 update ops that keep a momentum slot (RMSProp's `mom`) even at momentum 0, where it holds
# each step's update and feeds nothing back: the variable's own change says all it holds.
_MOMENTUM_KEPT = frozenset(["ApplyRMSProp", "ResourceApplyRMSProp", "SparseApplyRMSProp", "ResourceSparseApplyRMSProp",
                            "ApplyCenteredRMSProp", "ResourceApplyCenteredRMSProp", "SparseApplyCenteredRMSProp",
                            "ResourceSparseApplyCenteredRMSProp"])


def inert_slots(golden: Any, slots: Sequence[Slot]) -> Dict[str, str]:
    """Golden slots that change nothing of the run -> why: TF1 RMSProp's momentum slot where the
    update read momentum 0 (a Keras RMSprop makes none then)."""
    updates = golden.meta.get("updates") if isinstance(golden.meta.get("updates"), dict) else {}
    out = {}
    for slot in slots:
        fact = updates.get(slot.var) if isinstance(updates.get(slot.var), dict) else {}
        momentum = (fact.get("hyper") or {}).get("momentum")
        if slot.update in _MOMENTUM_KEPT and slot.role == "momentum" and momentum == 0.0:
            out[slot.name] = ("TF1 %s's momentum slot at momentum 0: it holds each step's update and feeds nothing "
                              "back, so the variable's comparison covers it; the port's optimizer keeps none"
                              % slot.update)
    return out


def one_value(value: np.ndarray) -> bool:
    """A slot as an optimizer makes it: one value everywhere (zeros, an initial accumulator)."""
    flat = np.asarray(value).reshape(-1)
    return flat.size > 0 and bool((flat == flat[0]).all())


def compact(value: np.ndarray) -> np.ndarray:
    """`value`, held as a read-only broadcast of its one element where it has one value everywhere:
    the port's own fresh slots of a big model then cost nothing until a writer encodes them."""
    flat = value.reshape(-1)
    return np.broadcast_to(flat[:1].copy().reshape(()), value.shape) if one_value(flat) else value


# The golden's slot roles -> the names hand-written optimizers (in any framework) give them; each
# adapter puts its framework's own names first (torch's exp_avg, optax's mu).
STATE_NAMES: Dict[str, Tuple[str, ...]] = {
    "m": ("m", "mu", "first_moment", "exp_avg_grad", "next_m"),
    "v": ("v", "nu", "second_moment", "next_v"),
    "vhat": ("vhat", "v_hat", "max_v"),
    "momentum": ("momentum", "velocity", "buf", "trace"),
    "rms": ("ms", "rms", "mean_square"),
    "mg": ("mg", "mean_grad"),
    "accumulator": ("accumulator", "acc"),
    "accum_grad": ("accum_grad",),
    "accum_var": ("accum_var",),
}


def names_for(role: str, names: Mapping[str, Tuple[str, ...]]) -> Tuple[str, ...]:
    """The state names that may hold a golden slot of `role` (`names`: an adapter's STATE_NAMES
    with its own first). A hand-written TF1 optimizer's slot has the role its name gave it
    (BERT's "adam_m"): that name itself, then the names of the known role its last word is."""
    if role in names:
        return names[role]
    return (role,) + names.get(role.rsplit("_", 1)[-1], ())


def golden_count(state: Mapping[str, Any], iterations: Sequence[str], beta1: Optional[float]) -> Optional[int]:
    """The steps the golden's optimizer had taken in `state` ("kind/name" -> value): its
    counter, or, for TF1's Adam, what its beta power says (beta1 ** (steps + 1)) where the port's
    beta1 is known."""
    for name in iterations:
        for kind in ("slot", "var"):
            if make_key(kind, name) in state:
                return int(np.asarray(state[make_key(kind, name)]))
    power = next((v for k, v in state.items() if k.endswith("beta1_power:0")), None)
    power = None if power is None else float(np.asarray(power))
    # a power that underflowed (beyond about 900 steps at beta1 0.9) no longer tells the count
    if beta1 is not None and power is not None and 0 < power < 1 and math.isfinite(power) and 0 < beta1 < 1:
        return int(round(math.log(power) / math.log(beta1))) - 1
    return None


@dataclass
class GoldenState:
    """The golden's state as a replay pairs it: golden name -> "kind/name" key, the model's
    variables, the optimizer's slots and step counters, and what no port replays (key -> why)."""

    keys: Dict[str, str]
    model_names: List[str]
    slots: List[Slot]
    iterations: List[str]
    not_replayed: Dict[str, str]


def golden_state(golden: Any, counterpart: str, port: str) -> GoldenState:
    """`golden`'s state split (split_state): TF1 optimizer state with no `counterpart` (the port's
    optimizer library: "Keras", "PyTorch", "optax") and TF1's accumulators of micro-batches,
    which a `port` ("TF2", ...) sums in its step, said not replayed."""
    keys = {n: make_key("var", n) for n in golden.names("var")}
    keys.update((n, make_key("slot", n)) for n in golden.names("slot"))
    recorded = golden.meta.get("slots")
    model_names, slots, iterations, orphans = split_state(list(keys), recorded if isinstance(recorded, dict) else None)
    not_replayed = {keys[name]: "TF1 optimizer state with no %s counterpart" % counterpart for name in orphans}
    accumulated = golden.meta.get("accumulation") if isinstance(golden.meta.get("accumulation"), dict) else {}
    for name in [n for n in accumulated.get("state") or () if n in model_names]:
        model_names.remove(name)
        why = "TF1's accumulator of micro-batches: a %s port sums them in its step, in no variable" % port
        not_replayed[keys[name]] = not_replayed[keys[name] + BEFORE] = why
    return GoldenState(keys, model_names, slots, iterations, not_replayed)

