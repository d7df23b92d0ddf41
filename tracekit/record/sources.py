"""The TF1 program's lines behind what a step records (tracekit/sources.py): each fetched
tensor's op, and for each variable the step changes, where it was created and the lines that
compute its update.

An update's lines are the ops between the step's gradients and the op that assigns the
variable: the optimizer's part of the step (google-research/bert's hand-written AdamWeightDecay:
its moments, `update += weight_decay_rate * param`, the assign), not the model's forward and
backward pass, which every update reads. Python 3.7 syntax.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Set

from ..keys import make_key
from ..sources import Lines, Source, ordered_lines, user_source

WALK_LIMIT = 400  # ops walked back from one update, at most
# Ops whose line is not the update's: variables and constants, made where they were declared.
SKIPPED = frozenset(["VariableV2", "VarHandleOp", "Const", "ReadVariableOp"])


def op_source(op: Any) -> Optional[Source]:
    """The user's line that made `op` (its traceback, TensorFlow's frames skipped)."""
    try:
        return user_source(_frames(op))
    except Exception:  # an op without a traceback (imported from a GraphDef): no line
        return None


def _frames(op: Any) -> Any:
    """The op's stack as (file, line, function, text) frames. TF 1.15 keeps it as a stack of
    frames whose text `op.traceback` reads for every frame; read here without it (a third of
    the time: the chosen frame's text is read once), where the op keeps one so."""
    raw = getattr(op, "_traceback", None)
    if raw is not None and not isinstance(raw, (list, tuple)) and hasattr(raw, "__len__"):
        try:
            return [(f.filename, f.lineno, f.name, "") for f in (raw[i] for i in range(len(raw)))]
        except (AttributeError, TypeError, IndexError):  # another TensorFlow's layout
            pass
    return op.traceback


def plan_sources(fetch: Mapping[str, Any], changed: Mapping[str, List[Any]], variables: Mapping[str, Any],
                 slots: Iterable[str], executed: Iterable[Any]) -> Dict[str, Lines]:
    """{key: Lines} of a kind of step: `fetch` its recorded tensors (key -> tensor), `changed`
    the variables it changes and the ops that do (name -> ops: an update, a moving average's
    assign), `variables` the graph's (name -> variable; each gets where it was created),
    `slots` which of them are optimizer state, `executed` the step's ops."""
    out: Dict[str, Lines] = {}
    for key, tensor in fetch.items():
        if key.startswith(("input/", "random/")):
            continue  # fed or drawn: a line says nothing a replay can act on
        made = op_source(tensor.op)
        if made is not None:
            out[key] = Lines(made)
    # the learning rate's schedule is its own line (lr/...), not the update's
    model = _model_cone(fetch, executed) | {t.op.name for k, t in fetch.items() if k.startswith("lr/")}
    slot_names = set(slots)
    for name, variable in variables.items():  # every variable: where it was created
        made = op_source(variable.op)
        if made is not None:
            out[make_key("slot" if name in slot_names else "var", name)] = Lines(made)
    for name, ops in changed.items():
        variable = variables.get(name)
        made = op_source(variable.op) if variable is not None else None
        walked: List[Any] = []
        for op in ops:
            walked.extend(_optimizer_ops(op, model))
        update = ordered_lines([op_source(op) for op in sorted(walked, key=lambda o: o._id)] +
                               [op_source(op) for op in ops])
        lines = Lines(made, update)
        if lines:
            out[make_key("slot" if name in slot_names else "var", name)] = lines
    return out


def _model_cone(fetch: Mapping[str, Any], executed: Iterable[Any]) -> Set[str]:
    """The ops the step's gradients and losses come from: the model's part of the step."""
    names = {op.name for op in executed}
    seen: Set[str] = set()
    stack = [t.op for k, t in fetch.items() if k.startswith(("grad/", "loss/"))]
    while stack:
        op = stack.pop()
        if op.name in seen or op.name not in names:
            continue
        seen.add(op.name)
        stack.extend(t.op for t in op.inputs if t.op.name not in seen)
    return seen


def _optimizer_ops(update: Any, model: Set[str]) -> List[Any]:
    """The ops `update` reads back to the model's part of the step (exclusive), at most
    WALK_LIMIT: what computes the update from the gradient, the slots and the variable."""
    seen: Dict[str, Any] = {}
    stack = [t.op for t in update.inputs]
    while stack and len(seen) < WALK_LIMIT:
        op = stack.pop()
        if op.name in seen or op.name in model or op.type in SKIPPED or _reads_variable(op):
            continue
        seen[op.name] = op
        stack.extend(t.op for t in op.inputs)
    return list(seen.values())


def _reads_variable(op: Any) -> bool:
    """A ref variable's read (its Identity), made where the variable was created."""
    return op.type == "Identity" and bool(op.inputs) and op.inputs[0].op.type == "VariableV2"
