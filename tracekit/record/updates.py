"""Which ops of a TF1 graph update which variable, and with what gradient, learning rate and slots.

Two kinds of update (and a third, read from what apply_gradients was seen building: paths.py):
- an optimizer's update op (`Apply*` / `ResourceApply*` / `*SparseApply*`), whose op-def
  input names say which input is the variable (`var`), the gradient (`grad`/`delta`), the
  learning rate (`lr`, else `alpha`) and the slots (the other variable inputs);
- a hand-written update (a custom optimizer's `apply_gradients`, decoupled weight decay,
  LAMB, ...): an assign op (`assign`, `assign_add`, `assign_sub`) on a trainable variable
  whose new value is computed from gradients. Its gradient is the one `tf.gradients` or
  `compute_gradients` gave for that variable (noted while the graph was built; after
  `tf.clip_by_global_norm`, the clipped one when the update reads that). Its slots are
  the variables assigned in the same way whose new value reads that gradient and which the
  variable's new value reads (paired by dataflow, whatever their names). Its learning rate is
  the scalar that scales the step nearest to the assign (`var - lr * update`). Initializers,
  checkpoint restores and `set_weights` assign without gradients: never updates.
"""

from __future__ import annotations

import re
from typing import AbstractSet, Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..keys import ASSIGNED
from .dataflow import PASS_THROUGH, Above, downstream, upstream

UPDATE_OP = re.compile(r"^(Resource)?(Sparse)?Apply[A-Z]")
ASSIGN_OPS = frozenset(["Assign", "AssignAdd", "AssignSub", "AssignVariableOp", "AssignAddVariableOp",
                        "AssignSubVariableOp"])
VARIABLE_OPS = frozenset(["VariableV2", "Variable", "VarHandleOp", "AutoReloadVariable"])
GRADIENTS_SCOPE = re.compile(r"^gradients(_\d+)?$")  # tf.gradients' scope, uniquified by later calls
GRAD_SEED = re.compile(r"^(Fill|grad_ys_\d+)$")
DT_RESOURCE, DT_INT64 = 20, 9
GRAD_ARGS = ("grad", "delta")
STATE_ARGS = ("beta1_power", "beta2_power")  # optimizer state that is not a slot of one variable
OFFSET = "_offset"  # a scalar input read as a counter variable plus a constant: "<arg>_offset" holds the constant


class Update:
    """One variable's update: the op, the variable, gradient, learning rate and slots it uses."""

    __slots__ = ("op", "kind", "var", "grad", "indices", "lr", "slots", "roles", "hyper", "unclipped", "state",
                 "decay", "decay_ops", "rates")

    def __init__(self, op: Any, kind: str, var: Optional[str], grad: Any = None, indices: Any = None,
                 lr: Any = None, roles: Optional[Dict[str, str]] = None, state: Iterable[str] = (),
                 hyper: Optional[Dict[str, Any]] = None) -> None:
        self.op = op
        self.kind = kind  # the update op's type, or ASSIGNED
        self.var = var
        self.grad = grad
        self.indices = indices
        self.lr = lr
        self.roles: Dict[str, str] = dict(roles or {})  # slot name -> what it is ("m", "accum", "adam_m", ...)
        self.slots: List[str] = list(self.roles) + [s for s in state if s not in self.roles]
        # the update op's other inputs, its hyperparameters ("l1", "epsilon", "momentum", ...) -> tensor
        self.hyper: Dict[str, Any] = dict(hyper or {})
        self.unclipped: Any = None  # the gradient before tf.clip_by_global_norm made `grad` of it
        self.state: Dict[str, str] = {}  # optimizer state that is no slot of one variable: argument -> variable
        self.decay: Any = None  # decoupled weight decay applied first (`var -= decay * var`): its tensor or number
        self.decay_ops: Tuple[str, ...] = ()  # the ops that apply it
        self.rates: List[Any] = []  # a hand-written update's other float scalars, nearest first: what else may be its rate

    @classmethod
    def of_op(cls, op: Any) -> "Update":
        """An optimizer's update op, read through its op-def's input names."""
        fields: Dict[str, Any] = {}
        roles: Dict[str, str] = {}
        state: Dict[str, str] = {}
        hyper: Dict[str, Any] = {}
        args = [arg.name for arg in op.op_def.input_arg]
        rate = "lr" if "lr" in args else "alpha"  # ApplyGradientDescent's rate is `alpha`; ApplyAddSign has both
        for arg, tensor in zip(op.op_def.input_arg, op.inputs):
            if arg.name == "var":
                fields["var"] = variable_name(tensor)
            elif arg.name in GRAD_ARGS:
                fields["grad"] = tensor
            elif arg.name == "indices":
                fields["indices"] = tensor
            elif arg.name == rate:
                fields["lr"] = tensor
            elif arg.is_ref or arg.type == DT_RESOURCE or arg.name in STATE_ARGS:
                name = variable_name(tensor)
                if name is not None:
                    if arg.name in STATE_ARGS:
                        state[arg.name] = name
                    else:
                        roles[name] = arg.name
            elif counter(tensor) is not None:  # AdagradDA's global_step: the step counter plus one
                state[arg.name], hyper[arg.name + OFFSET] = counter(tensor)
            else:
                hyper[arg.name] = tensor
        update = cls(op, op.type, fields.pop("var", None), roles=roles, state=list(state.values()), hyper=hyper,
                     **fields)
        update.state = state
        return update


def variable_name(tensor: Any) -> Optional[str]:
    """The variable a tensor reads (through Identity/ReadVariableOp/...), e.g. 'dense/kernel:0'."""
    op = tensor.op
    for _ in range(16):
        if op.type in VARIABLE_OPS:
            return op.name + ":0"
        if op.type not in PASS_THROUGH or not op.inputs:
            return None
        op = op.inputs[0].op
    return None


def counter(tensor: Any, limit: int = 8) -> Optional[Tuple[str, int]]:
    """(the integer variable, the constant added) of an integer scalar computed as a variable's
    value plus a constant (through identities and casts), else None."""
    dtype = getattr(tensor, "dtype", None)
    if dtype is None or not dtype.is_integer or tensor.shape.ndims != 0:
        return None
    offset = 0
    for _ in range(limit):
        op = tensor.op
        if op.type in PASS_THROUGH or op.type == "Cast":
            if op.type in PASS_THROUGH and variable_name(tensor) is not None:
                return variable_name(tensor), offset
            if op.type in VARIABLE_OPS:
                return op.name + ":0", offset
            tensor = op.inputs[0]
        elif op.type in ("Add", "AddV2") and len(op.inputs) == 2:
            fixed = [i for i, t in enumerate(op.inputs) if _integer(t.op) is not None]
            if len(fixed) != 1:
                return None
            offset += _integer(op.inputs[fixed[0]].op)
            tensor = op.inputs[1 - fixed[0]]
        elif op.type in VARIABLE_OPS:
            return op.name + ":0", offset
        else:
            return None
    return None


def _integer(op: Any) -> Optional[int]:
    """An integer scalar constant's value, else None."""
    if op.type != "Const":
        return None
    proto = op.get_attr("value")
    for values in (proto.int64_val, proto.int_val):
        if len(values) == 1:
            return int(values[0])
    if proto.tensor_content:
        found = np.frombuffer(proto.tensor_content, dtype=np.int64 if proto.dtype == DT_INT64 else np.int32)
        return int(found[0]) if found.size == 1 else None
    return None


def op_updates(graph: Any) -> List[Update]:
    """Every optimizer update op in the graph."""
    return [Update.of_op(op) for op in graph.get_operations() if UPDATE_OP.match(op.type)]


# Parameter-server training with SyncReplicasOptimizer: a worker's step pushes its gradients to
# accumulators (one per variable, shared as "<variable>/grad_accum"), and the chief applies the
# aggregate in a run of its own that waits for them.
PUSH_OPS = frozenset(["AccumulatorApplyGradient", "ResourceAccumulatorApplyGradient",
                      "SparseAccumulatorApplyGradient"])
TAKE_OPS = frozenset(["AccumulatorTakeGradient", "ResourceAccumulatorTakeGradient",
                      "SparseAccumulatorTakeGradient"])
_ACCUMULATED = "/grad_accum"


def pushed_update(op: Any) -> Optional[Update]:
    """A worker's push of a variable's gradient to its accumulator, as that variable's update
    (None when the accumulator is not one of a variable's)."""
    shared = _shared_name(op.inputs[0].op)
    if not shared.endswith(_ACCUMULATED):
        return None
    var = shared[:-len(_ACCUMULATED)]
    args = {arg.name: tensor for arg, tensor in zip(op.op_def.input_arg, op.inputs)}
    if op.type == "SparseAccumulatorApplyGradient":
        return Update(op, op.type, var, grad=args.get("gradient_values"), indices=args.get("gradient_indices"))
    return Update(op, op.type, var, grad=args.get("gradient"))


def pushed_by_a_worker(op: Any) -> bool:
    """Whether an accumulator op (a push or a take) works on a SyncReplicasOptimizer's
    accumulator, shared as "<variable>/grad_accum" between the workers and the chief."""
    return _shared_name(op.inputs[0].op).endswith(_ACCUMULATED)


def _shared_name(op: Any) -> str:
    for _ in range(8):  # through identities to the accumulator op
        try:
            name = op.get_attr("shared_name")
            return name.decode() if isinstance(name, bytes) else str(name)
        except (ValueError, AttributeError):
            if op.type not in PASS_THROUGH or not op.inputs:
                return ""
            op = op.inputs[0].op
    return ""


def advances(op: Any) -> bool:
    """Does an assign to a counter advance it (assign_add, or an assign of a value computed from
    the counter itself: `global_step.assign(global_step + 1)`), rather than set it (its
    initializer, a checkpoint restore, a value fed)?"""
    if op.type in ("AssignAdd", "AssignAddVariableOp"):
        return True
    target = variable_name(op.inputs[0])
    return target is not None and target.rsplit(":", 1)[0] in upstream(op.inputs[1].op, limit=64)


def is_gradient_seed(op: Any) -> bool:
    """The op a tf.gradients call starts from: "<scope>gradients/Fill" (TF 1.15) or
    "<scope>gradients/grad_ys_0" (TF 2, or grad_ys given)."""
    parts = op.name.split("/")
    return len(parts) >= 2 and bool(GRADIENTS_SCOPE.match(parts[-2])) and bool(GRAD_SEED.match(parts[-1]))


def assigned_updates(graph: Any, trainable: Set[str], gradients: Dict[str, Any],
                     clipped: Dict[str, Any], sparse: Optional[Dict[str, Any]] = None,
                     slots: Optional[Set[str]] = None) -> List[Update]:
    """The hand-written updates of the graph's trainable variables. `gradients`: variable name ->
    the gradient tensor tf.gradients / compute_gradients gave for it; `clipped`: a gradient
    tensor's name -> what tf.clip_by_global_norm made of it; `sparse`: variable name -> the
    IndexedSlices gradient of a variable read by a gather (an embedding), which a hand-written
    update reads converted to a dense tensor; `slots`: the trainable variables to take as
    candidate slots (None: those no gradient was taken of, where any was; the ones no update turns
    out to read are then updates of their own)."""
    sparse = sparse or {}
    derived = downstream([op for op in graph.get_operations() if is_gradient_seed(op)]
                          + [g.op for g in gradients.values()] + [s.values.op for s in sparse.values()])
    # A trainable variable no gradient was taken of, where the program took gradients, may be a
    # slot: standalone Keras' optimizers make their moments with K.variable, trainable.
    differentiated = set(gradients) | set(sparse)
    maybe_slot = (trainable - differentiated) if differentiated and slots is None else (slots or set())
    own: List[Any] = []
    state: Dict[str, Any] = {}  # other variables assigned from gradients: candidate slots
    for op in graph.get_operations():
        if op.type in ASSIGN_OPS and op.name in derived:
            target = variable_name(op.inputs[0])
            if target in trainable and target not in maybe_slot:
                own.append((op, target))
            elif target is not None:
                state.setdefault(target, op)
    # What each update's new value reads is asked only of gradients (taken, clipped, made dense)
    targets = {g.op.name for g in gradients.values()} | {a.op.name for a in clipped.values()} | {
        c.name for s in sparse.values() for c in _dense_conversions(s)}
    above = Above(derived, targets, graph)

    def reads(assign: Any) -> AbstractSet[str]:
        """The gradients (of `targets`) the new value of `assign` is computed from."""
        return above(assign.inputs[1].op)

    fed: Dict[str, Set[str]] = {}

    def feeds(slot: str, assign: Any) -> Set[str]:
        """What the slot's value flows into (its reads: a slot is read by its updates only)."""
        if slot not in fed:
            fed[slot] = downstream([assign.inputs[0].op])
        return fed[slot]

    updates = []
    for op, var in own:
        grad = unclipped = gradients.get(var)
        grad_ops: Set[str] = set()  # the ops whose value is the gradient the update reads
        if grad is not None:
            after = clipped.get(grad.name)
            if after is not None and after.op.name in reads(op):
                grad = after
            elif grad.op.name not in reads(op):
                grad = None  # a gradient of another tf.gradients call than the one this update uses
            if grad is not None:
                grad_ops = {grad.op.name}
        elif var in sparse:
            # each use of the rows converts them to a dense tensor of its own (tf.square(grad) too)
            conversions = _dense_conversions(sparse[var])
            read = [c for c in conversions if c.name in reads(op)]
            grad = read[0].outputs[0] if read else None
            grad_ops = {c.name for c in conversions}
            unclipped = None
        roles = {}
        for slot, assign in state.items():
            if op.name not in feeds(slot, assign):
                continue  # the variable's new value does not read it
            if grad is not None and not grad_ops & reads(assign):
                continue  # computed from another variable's gradient
            roles[slot] = _role(slot, var)
        rates = _scalars(op, derived)
        update = Update(op, ASSIGNED, var, grad=grad, roles=roles, lr=_learning_rate(op, derived))
        update.rates = [t for t in rates if update.lr is None or t.name != update.lr.name]
        update.unclipped = unclipped if grad is not None and grad is not unclipped else None
        updates.append(update)
    slots = {slot for update in updates for slot in update.roles}
    if maybe_slot - slots:  # not a slot of any update after all: an update of its own, gradient unknown
        return assigned_updates(graph, trainable, gradients, clipped, sparse, maybe_slot & slots)
    return updates


_SCALING = frozenset(["Mul", "RealDiv", "Div"])
# What an IndexedSlices gradient becomes where dense arithmetic reads it (its rows summed by id).
DENSE_CONVERSIONS = frozenset(["UnsortedSegmentSum"])


def _dense_conversions(grad: Any) -> List[Any]:
    """The ops that make an IndexedSlices gradient dense where arithmetic reads it."""
    return [c for c in grad.indices.consumers() if c.type in DENSE_CONVERSIONS]


def _learning_rate(assign: Any, derived: Set[str], limit: int = 64) -> Any:
    """The learning rate a hand-written update reads: the scalar float that scales the step
    nearest to the assign (`var - lr * update`, `assign_sub(lr * grad)`), taken from outside
    what the gradients flow through; None when no such scalar is found."""
    queue, seen = [assign.inputs[1].op], set()
    while queue and len(seen) < limit:
        op = queue.pop(0)
        if op.name in seen or op.name not in derived:
            continue
        seen.add(op.name)
        if op.type in _SCALING:
            for tensor in op.inputs:
                if tensor.op.name not in derived and _float_scalar(tensor):
                    return tensor
        queue.extend(t.op for t in op.inputs)
    return None


def _scalars(assign: Any, derived: Set[str], limit: int = 64) -> List[Any]:
    """The float scalars a hand-written update reads from outside what the gradients flow through,
    nearest to the assign first: where the one _learning_rate takes is no rate (rerun.py), the
    rate may be among them (`(rate + 1e-30 * y) * x`: the rate is an addend's other term)."""
    queue, seen, out = [assign.inputs[1].op], set(), []  # type: List[Any], Set[str], List[Any]
    while queue and len(seen) < limit:
        op = queue.pop(0)
        if op.name in seen or op.name not in derived:
            continue
        seen.add(op.name)
        for tensor in op.inputs:
            if tensor.op.name not in derived and _float_scalar(tensor) and all(t.name != tensor.name for t in out):
                out.append(tensor)
        queue.extend(t.op for t in op.inputs)
    # a product of scalars (the rate times a parameter's scale, in Adafactor): its factors too, next
    expanded: List[Any] = []
    for tensor in out:
        expanded += [t for t in [tensor] + _factors(tensor) if all(o.name != t.name for o in expanded)]
    return expanded


def _factors(tensor: Any, depth: int = 3) -> List[Any]:
    """The float scalars a scalar is the product or quotient of, nearest first (`depth` levels)."""
    op = tensor.op
    if depth <= 0 or op.type not in _SCALING:
        return []
    found = [t for t in op.inputs if _float_scalar(t)]
    return found + [f for t in found for f in _factors(t, depth - 1)]


def _float_scalar(tensor: Any) -> bool:
    shape, dtype = getattr(tensor, "shape", None), getattr(tensor, "dtype", None)
    try:
        return shape is not None and shape.ndims == 0 and bool(dtype.is_floating)
    except AttributeError:
        return False


def _role(slot: str, var: str) -> str:
    """What a hand-written slot is, from its name: "adam_m" for "dense/kernel/adam_m:0" of "dense/kernel:0"."""
    name, owner = slot.rsplit(":", 1)[0], var.rsplit(":", 1)[0]
    return name[len(owner) + 1:] if name.startswith(owner + "/") else name.rsplit("/", 1)[-1]


def variables_read(tensors: Sequence[Any]) -> Set[str]:
    """The names ("v:0") of the variables `tensors` (of one graph) are computed from, by data edges."""
    ops: Set[str] = set().union(*(upstream(tensor.op) for tensor in tensors))
    return {name + ":0" for name in ops if tensors[0].graph.get_operation_by_name(name).type in VARIABLE_OPS}
