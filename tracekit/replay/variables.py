"""The port's variables: found, paired with the golden's by name, loaded and read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import ReplayError
from ..keys import UNCLIPPED, make_key
from . import conversions, proposal, varmap
from .conversions import Conversion, bind, by_names, carried_conversions, partition_groups, partitioned
from .port_state import PortState, expected_shapes, held_state
from .slots import Slot


# Keras 3 keeps each SeedGenerator's random-number state in a variable of this name (dropout
# has one): state of the port's own random numbers, with no TF1 counterpart to map.
KERAS3_RNG_STATE = "seed_generator_state"


def model_variables(model: Any) -> List[Any]:
    """The model's variables; other trackables Keras lists among them (an adapted StringLookup's
    vocabulary table handler) and Keras 3's random-number state are not the golden's."""
    if model is None:
        return []
    try:
        found = list(model.variables)
    except ValueError:  # an unbuilt Keras model refuses to list its weights
        return []
    return [v for v in found if is_variable(v) and name_of(v).rpartition("/")[2] != KERAS3_RNG_STATE]


def is_variable(value: Any) -> bool:
    """A variable of TF 2, tf-keras or Keras 3: named, shaped, typed and assignable."""
    names = (getattr(value, "path", None), getattr(value, "name", None))
    return (any(isinstance(n, str) and n for n in names) and hasattr(value, "assign")
            and hasattr(value, "shape") and hasattr(value, "dtype"))


def unwrap(variable: Any) -> Any:
    """The distributed variable a per-replica component belongs to (itself otherwise)."""
    container = getattr(variable, "_distributed_container", None)
    return container() if callable(container) else variable


# tf.Variable, tf-keras and Keras 3 variables answer these three differently: Keras 3 gives a
# dtype name, a tuple shape and a bare `name` ("kernel"), its scoped name being `path`.
def name_of(variable: Any) -> str:
    path = getattr(variable, "path", None)
    return path if isinstance(path, str) and path else variable.name


def shape_of(variable: Any) -> Tuple[int, ...]:
    return tuple(int(d) for d in variable.shape)


def numpy_dtype_of(variable: Any) -> np.dtype:
    dtype = variable.dtype
    return np.dtype(getattr(dtype, "as_numpy_dtype", None) or dtype)


def cast_for(value: Any, variable: Any) -> np.ndarray:
    """A golden value ready to assign to `variable`: its dtype, and checked to be its shape."""
    arr = np.asarray(value)
    if tuple(arr.shape) != shape_of(variable):
        raise ReplayError("cannot load %s: golden shape %s, TF2 shape %s" % (name_of(variable), arr.shape,
                                                                          list(shape_of(variable))))
    return arr.astype(numpy_dtype_of(variable), copy=False)


def map_variables(golden: Sequence[Tuple[str, Tuple[int, ...]]], tf_vars: Sequence[Any], var_map: Any,
                  state: Sequence[Tuple[str, Optional[Tuple[int, ...]]]] = (), owners: Optional[Dict[str, str]] = None,
                  converted: Optional[Dict[str, str]] = None) -> Tuple[varmap.Mapping, varmap.Mapping]:
    """Pair the golden's model variables (name, shape) with the port's, and its optimizer state
    (`state`: name, the shape the port's variable must have or None) with port variables that
    hold it (a hand-written optimizer's): by var_map, by being named after the port variable of
    the slot's variable (`owners`: golden slot -> its variable; `converted`: a converted golden
    variable -> its port variable's name), or by name among the variables the model left. Any
    mismatch stops the replay before it starts, listing both sides. Returns the model's mapping
    and the state's (its pairs only: golden state no port variable holds is left to the port's
    optimizer)."""
    side = port_side(tf_vars)
    if not tf_vars:
        raise ReplayError("no TF2 variables to replay into: build the model before replaying (call it once "
                          "on a batch, or model.build(input_shape)), or pass variables=[...]")
    cands = [varmap.Candidate(name_of(v), shape_of(v), v) for v in tf_vars]
    wanted = [(name, shape) for name, shape in state if shape is not None]
    # A dict names state on purpose; regex rules and callables written for the model's names may
    # turn a slot's name into one the port lacks, or refuse it: that state is left to the rules by name.
    named = var_map if isinstance(var_map, dict) else _lenient(var_map)
    explicit = varmap.match(wanted, cands, named, rules="explicit")
    if not isinstance(var_map, dict):
        shapes = dict(wanted)
        explicit.undecided += explicit.unmatched_golden + [(name, shapes[name]) for name in explicit.left_out]
        explicit.unmatched_golden, explicit.left_out = [], []
    claimed = {id(c) for c in explicit.pairs.values()} | {id(c) for _, _, c in explicit.shape_mismatch}
    mapping = varmap.match(list(golden), [c for c in cands if id(c) not in claimed], var_map)
    ported = dict(converted or {}, **{name: cand.name for name, cand in mapping.pairs.items()})
    named_after = {slot: _strip(ported[var]) + slot[len(_strip(var)):] for slot, var in (owners or {}).items()
                   if var in ported and slot.startswith(_strip(var) + "/")}
    found = varmap.match(explicit.undecided, mapping.unmatched_tf2, lambda name: named_after.get(name), rules="names")
    found.how.update((name, "named after its variable's") for name, how in found.how.items() if how == "explicit")
    mapping.unmatched_tf2 = found.unmatched_tf2
    held = varmap.Mapping(pairs=dict(explicit.pairs, **found.pairs), how=dict(explicit.how, **found.how),
                          unmatched_golden=explicit.unmatched_golden,
                          shape_mismatch=explicit.shape_mismatch + found.shape_mismatch, left_out=explicit.left_out)
    if not mapping.ok or held.unmatched_golden or held.shape_mismatch:
        golden_left = mapping.unmatched_golden + [(name, shape) for name, shape, _ in mapping.shape_mismatch]
        port_left = [(c.name, c.shape) for c in mapping.unmatched_tf2 + [c for _, _, c in mapping.shape_mismatch]]
        state_lines = ["  optimizer state: var_map names %s, which is not among the %s variables" % (name, side)
                       for name, _ in held.unmatched_golden]
        state_lines += ["  optimizer state: shape differs: golden %s %s vs %s %s %s" % (name, shape, side, shown(c), c.shape)
                        for name, shape, c in held.shape_mismatch]
        advice = conversions.suggest(golden_left, port_left) + [
            "name the port's layers like the TF1 scopes, or pass var_map= (a dict, regex rules or a callable; "
            "None for a golden variable the port has no counterpart of)"]
        raise ReplayError("\n".join(["the %s variables do not match the golden's:" % side] + mismatch_lines(mapping, side) +
                                     state_lines + advice + proposal.proposed(golden_left, port_left)))
    return mapping, held


def _strip(name: str) -> str:
    return name[:-2] if name.endswith(":0") else name


def _lenient(var_map: Any) -> Any:
    """A callable var_map asked about optimizer state, which a callable written before it could
    be mapped never expected: what it raises is no answer (it is asked again by the rules)."""
    if not callable(var_map):
        return var_map

    def ask(name: str) -> Any:
        try:
            return var_map(name)
        except Exception:  # noqa: BLE001 - any failure on a name it was not written for
            return None
    return ask


def port_side(variables: Sequence[Any]) -> str:
    """What the port's variables are called in messages: their `framework` ("PyTorch": an
    adapter's wrapper says), TF2's by default."""
    return str(getattr(variables[0], "framework", "TF2")) if variables else "TF2"


def shown(cand: varmap.Candidate) -> str:
    """A port variable as a message names it: its own `shown` (an adapter's name for it, where
    pairing sees TF's), else its name."""
    return str(getattr(cand.obj, "shown", cand.name))


def mismatch_lines(mapping: varmap.Mapping, side: str = "TF2") -> List[str]:
    """The error's listing: counts, then each variable that did not pair, on either side."""
    out = ["%d golden variables, %d %s variables, %d matched" % (
        len(mapping.pairs) + len(mapping.unmatched_golden) + len(mapping.shape_mismatch),
        len(mapping.pairs) + len(mapping.unmatched_tf2) + len(mapping.shape_mismatch), side, len(mapping.pairs))]
    for name, shape, cand in mapping.shape_mismatch:
        out.append("  shape differs: golden %s %s vs %s %s %s" % (name, shape, side, shown(cand), cand.shape))
    for name, shape in mapping.unmatched_golden:
        out.append("  only in the golden: %s %s" % (name, shape))
    for cand in mapping.unmatched_tf2:
        out.append("  only in %s: %s %s" % (side, shown(cand), cand.shape))
    auto = [(name, cand) for name, cand in mapping.pairs.items() if mapping.how.get(name) != "explicit"]
    if auto:
        out.append("paired automatically (check them too):")
        out += ["  %s -> %s (%s)" % (name, shown(cand), varmap.explain(mapping.how.get(name, "?"))) for name, cand in auto]
    return out


def initial_value(golden: Any, kind: str, name: str) -> np.ndarray:
    """The golden's initial value of a variable or slot a replay with init='golden' loads: a
    ReplayError naming the golden and what to do where it has none (raised inside a traced step,
    the runner hands it on in place of TensorFlow's own error)."""
    initial = golden.initial
    if make_key(kind, name) not in initial:
        raise ReplayError(
            "%s: the initial state has no %s/%s, which a replay with init='golden' loads into the port%s; the golden "
            "holds it in its steps but not before them (an update by an earlier tracekit kept only what the "
            "TF2 run had before its first step, or one from a replay with init='seed'): restore the golden it "
            "replaced (tracekit log names where it was kept) and update from that, or replay with init='seed' "
            "to start from the port's own values"
            % (golden.path, kind, name, "'s optimizer at its first update" if kind == "slot" else ""))
    return initial[kind, name]


def partitioned_conversions(given: Sequence[Conversion], golden: List[Tuple[str, Tuple[int, ...]]], tf_vars: Sequence[Any],
                 var_map: Any) -> List[Conversion]:
    """Conversions for the golden's variables held in several partitions, each paired (by the
    whole variable's name and shape, as any variable) with a port variable no conversion takes."""
    taken = {name for conv in given for name in conv.golden}
    ported = {id(v) for conv in given for v in conv.port}
    groups = {whole: parts for whole, parts in partition_groups(golden).items()
              if not any(name in taken for name, _ in parts)}
    if not groups:
        return []
    wholes = [(whole, (sum(shape[0] for _, shape in parts),) + parts[0][1][1:]) for whole, parts in groups.items()]
    offered = [varmap.Candidate(name_of(v), shape_of(v), v) for v in tf_vars if id(v) not in ported]
    found = varmap.match(wholes, offered, var_map)
    return [partitioned([name for name, _ in groups[whole]], cand.obj) for whole, cand in found.pairs.items()]


def slot_owners(golden: Any) -> Dict[str, str]:
    """The golden's slots (optimizer state) -> the variable each belongs to."""
    found = golden.meta.get("slots") if isinstance(golden.meta.get("slots"), dict) else {}
    owners = {name: str(s["var"]) for name, s in found.items() if isinstance(s, dict) and s.get("var")}
    return {name: owners[name] for name in golden.names("slot") if name in owners}


def following(conversions: Sequence[Conversion], owners: Dict[str, str]) -> List[Conversion]:
    """The conversions without those of slots whose variables are converted: a slot follows its
    variable's conversion, so converting it too says what the port means already. A conversion
    of a slot whose variable is not converted is refused, saying so."""
    converted = {name for conv in conversions for name in conv.golden if name not in owners}
    kept = []
    for conv in conversions:
        slots = [name for name in conv.golden if name in owners]
        if not slots:
            kept.append(conv)
            continue
        alone = [name for name in slots if owners[name] not in converted]
        if alone or len(slots) < len(conv.golden):
            name = (alone or slots)[0]
            raise ReplayError("conversion %s: %s is a slot of %s (its optimizer's state), and a slot follows its "
                              "variable's conversion: convert %s instead and leave its slots out"
                              % (conv.describe, name, owners[name], owners[name]))
    return kept


LEFT_OUT = "left out by var_map (mapped to None: the port has no counterpart)"


@dataclass
class Paired:
    """What a replay pairs before its first step."""

    conversions: List[Conversion]  # given, carried in the var_map, or made for partitioned variables
    mapping: varmap.Mapping  # the golden's model variables -> the port's
    state: PortState  # golden optimizer state the port's own variables hold (a hand-written optimizer's)
    slots: List[Slot]  # golden slots left to the port's optimizers
    iterations: List[str]  # golden step counters left to them
    not_replayed: Dict[str, str]  # "kind/name" var_map leaves out -> why


def pair_port(golden: Any, tf_vars: Sequence[Any], var_map: Any, convert: List[Conversion], model_names: List[str],
              slots: List[Slot], iterations: List[str], keys: Dict[str, str]) -> Paired:
    """Pair the golden's variables, slots and counters (`keys`: golden state name -> key) with
    the port's variables: conversions first (and their port variables named in the var_map
    resolved), then the model's variables and the state the port holds itself (map_variables).
    Stops the replay, listing both sides, where they do not pair."""
    shapes = {t.name: t.shape for t in golden.catalog if t.kind in ("var", "slot")}
    var_map, carried = carried_conversions(var_map)
    converts = by_names(following(convert + carried, slot_owners(golden)), {name_of(v): v for v in tf_vars})
    converts += partitioned_conversions(converts, [(n, shapes.get(n) or ()) for n in model_names], tf_vars, var_map)
    bind(converts, {n: shapes.get(n) or () for n in model_names}, shape_of)
    converted = {name for conv in converts for name in conv.golden}
    ported = {id(v) for conv in converts for v in conv.port}
    expected = expected_shapes(slots, shapes, converts, shape_of)
    state = [(s.name, expected[s.name]) for s in slots] + [(n, shapes.get(n) or ()) for n in iterations]
    one_to_one = {name: name_of(conv.port[conv.golden.index(name)] if len(conv.port) == len(conv.golden)
                                else conv.port[0]) for conv in converts for name in conv.golden}
    mapping, held = map_variables([(n, shapes.get(n) or ()) for n in model_names if n not in converted],
                                  [v for v in tf_vars if id(v) not in ported], var_map, state,
                                  {s.name: s.var for s in slots}, one_to_one)
    pairs, errors = held_state(held.pairs, slots, keys, converts)
    if errors:
        raise ReplayError("the optimizer state var_map names cannot be held:\n%s" % "\n".join(errors))
    left_out = set(mapping.left_out)
    not_replayed = {}
    for name in sorted(left_out):  # no counterpart in the port, as var_map says: nor its gradient and slots
        not_replayed[make_key("var", name)] = LEFT_OUT
        not_replayed.update((make_key("grad", g), LEFT_OUT) for g in golden.names("grad")
                            if g == name or g.startswith((name + "/", name + UNCLIPPED)))
    not_replayed.update((keys[name], LEFT_OUT) for name in held.left_out)
    not_replayed.update((make_key("slot", s.name), LEFT_OUT) for s in slots if s.var in left_out)
    taken = set(held.pairs) | set(held.left_out)  # state the port's own variables hold, or none does
    return Paired(converts, mapping, PortState(pairs, held),
                  [s for s in slots if s.var not in left_out and s.name not in taken],
                  [n for n in iterations if n not in taken], not_replayed)
