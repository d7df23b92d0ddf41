"""Optimizer state the port keeps in variables of its own: a hand-written optimizer's slots
(BERT's `adam_m` and `adam_v`) and its step counter.

They are mapped as the model's variables are (var_map names them, or each is named after its
variable's port variable, or their names match the golden's; never by order, which would be a
guess: variables.map_variables), then loaded, read and forced as they are,
in the golden's names: no optimizer convention stands between them. A slot of a variable held
through a weight conversion is converted as its variable is (a transposed kernel's m is
transposed too). No TensorFlow here: the port's variables are taken as given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Collection, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..keys import make_key
from .conversions import Conversion
from .slots import Slot, split_state
from .varmap import Candidate, Mapping


@dataclass(frozen=True, eq=False)
class Held:
    """Golden state the port holds: its keys ("slot/<name>", or "var/<counter>") in the
    conversion's golden order, and the port's variables in its port order."""

    keys: Tuple[str, ...]
    variables: Tuple[Any, ...]
    conversion: Optional[Conversion] = None

    def to_port(self, values: Sequence[np.ndarray]) -> List[np.ndarray]:
        return self.conversion.deltas_to_port(values) if self.conversion is not None else list(values)

    def to_golden(self, values: Sequence[np.ndarray]) -> List[np.ndarray]:
        return self.conversion.deltas_to_golden(values) if self.conversion is not None else list(values)


def expected_shapes(slots: Sequence[Slot], shapes: Dict[str, Tuple[int, ...]],
                    conversions: Sequence[Conversion], shape_of: Callable[[Any], Tuple[int, ...]]
                    ) -> Dict[str, Optional[Tuple[int, ...]]]:
    """Golden slot name -> the shape its port variable must have: the golden's, or for a slot of
    a converted variable that of the port variable its elements move to (None where the
    conversion spreads one golden variable over several port variables: not supported)."""
    out: Dict[str, Optional[Tuple[int, ...]]] = {}
    for slot in slots:
        conv = next((c for c in conversions if slot.var in c.golden), None)
        if conv is None:
            out[slot.name] = tuple(shapes.get(slot.name) or ())
        elif len(conv.golden) == len(conv.port):
            out[slot.name] = shape_of(conv.port[conv.golden.index(slot.var)])
        elif len(conv.port) == 1:
            out[slot.name] = shape_of(conv.port[0])
        else:
            out[slot.name] = None
    return out


def held_state(pairs: Dict[str, Candidate], slots: Sequence[Slot], keys: Dict[str, str],
               conversions: Sequence[Conversion]) -> Tuple[List[Held], List[str]]:
    """The golden state names paired with port variables -> what the port holds, and the
    error lines for slots of converted variables that cannot be held (a role mapped for some of
    the conversion's variables only)."""
    by_name = {s.name: s for s in slots}
    held, errors = [], []
    groups: Dict[Tuple[int, str], Dict[int, Tuple[str, Any]]] = {}
    for name, cand in pairs.items():
        slot = by_name.get(name)
        conv = next((c for c in conversions if slot is not None and slot.var in c.golden), None)
        if slot is None or conv is None:
            held.append(Held((keys[name],), (cand.obj,)))
            continue
        groups.setdefault((id(conv), slot.role), {})[conv.golden.index(slot.var)] = (name, cand.obj)
    for (conv_id, role), found in groups.items():
        conv = next(c for c in conversions if id(c) == conv_id)
        if len(found) != len(conv.golden):
            errors.append("  the %s slots of %s: map one for each of %s" % (role, conv.describe, ", ".join(conv.golden)))
            continue
        ordered = [found[k] for k in range(len(conv.golden))]
        ports = list({id(v): v for _, v in ordered}.values())
        if len(ports) != len(conv.port):
            errors.append("  the %s slots of %s: %d port variables for its %d" % (role, conv.describe, len(ports),
                                                                                 len(conv.port)))
            continue
        held.append(Held(tuple(keys[n] for n, _ in ordered), tuple(ports), conv))
    return held, errors


class PortState:
    """The golden state the port holds in its own variables."""

    def __init__(self, held: Sequence[Held], mapping: Mapping) -> None:
        self.held = list(held)
        self.mapping = mapping  # golden name -> the port variable (Candidate), and how it was matched

    @property
    def keys(self) -> List[str]:
        return [key for h in self.held for key in h.keys]

    def variables(self) -> List[Any]:
        return [v for h in self.held for v in h.variables]

    def unconverted(self, keys: Collection[str]) -> List[Any]:
        """The variables of `keys` held as the golden's values are (no conversion): `read` may be
        given their digests."""
        return [v for h in self.held if h.conversion is None and len(h.keys) == len(h.variables)
                for key, v in zip(h.keys, h.variables) if key in keys]

    def read(self, value_of: Callable[[Any], np.ndarray]) -> List[Tuple[str, np.ndarray]]:
        out = []
        for h in self.held:
            out.extend(zip(h.keys, h.to_golden([value_of(v) for v in h.variables])))
        return out

    def assign(self, state: Dict[str, np.ndarray], cast: Callable[[Any, Any], np.ndarray]) -> List[str]:
        """Set each held variable to `state` ("kind/name" -> the golden's value) where it holds
        all it needs; returns the keys set."""
        done = []
        for h in self.held:
            values = [state.get(key) for key in h.keys]
            if any(v is None for v in values):
                continue
            for variable, value in zip(h.variables, h.to_port(values)):
                variable.assign(cast(value, variable))
            done.extend(h.keys)
        return done

    def described(self) -> Dict[str, str]:
        """golden name -> the port variable's name, for the replay's mapping record."""
        return {name: cand.name for name, cand in self.mapping.pairs.items()}


def starts_fresh(golden: Any) -> bool:
    """Did the golden's recording start at the optimizer's first update (its step counters at 0,
    or none recorded)? One recorded mid-run holds trained slots: nothing to say where the
    port's optimizer should start."""
    initial = golden.initial
    _, _, counters, _ = split_state([name for name in golden.names("var")])
    counts = [initial[make_key("var", name)] for name in counters if make_key("var", name) in initial]
    return all(int(np.asarray(count)) == 0 for count in counts)


SHOWN_SLOTS = 8  # slots written out in the var_map to fill in


def unmapped_state(index: int, slots: Sequence[Tuple[str, str, str]], counters: Sequence[str]) -> str:
    """Why a port whose gradients no optimizer applied (a hand-written one) leaves the golden's
    optimizer state unpaired, with the var_map to fill in: `slots` (name, its variable, role),
    `counters` ("var/<name>") no port variable holds."""
    lines = ['        "%s": <the port variable holding it>,  # %s of %s' % (name, role, var)
             for name, var, role in slots[:SHOWN_SLOTS]]
    if len(slots) > SHOWN_SLOTS:
        lines.append("        # ... and %d more slots like these" % (len(slots) - SHOWN_SLOTS))
    lines += ['        "%s": <its step counter>,' % key.partition("/")[2] for key in counters]
    return ("step %d: the port took its gradients (tf.GradientTape.gradient or tf.gradients) and no Keras optimizer "
            "applied them: a hand-written optimizer. The golden holds %d optimizer slots%s of the variables it updated "
            "that no port variable holds. Map the optimizer's own variables as the model's, in var_map (a dict as "
            "below; regex rules or a callable too), or to None where the port keeps no such state:\n"
            "    var_map = {\n%s\n    }" % (index, len(slots), " and a step counter" if counters else "",
                                           "\n".join(lines)))
