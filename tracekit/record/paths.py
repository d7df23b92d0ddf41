"""What a tf.compat.v1.train optimizer built for each variable, and which of those updates the
audit knows although no `Apply*` op makes them.

`apply_gradients` hands each (gradient, variable) pair to one of its methods: `_apply_dense`,
`_apply_sparse` (an `IndexedSlices` gradient, its rows first summed by index) or their
`_resource_*` forms. optimizer.py notes each call as an `Applied`: the method taken, the classes
that define it, the gradient given and the one consumed, the slots by their TF1 names, the
optimizer's other state and scalars, and the ops the call created. Most methods build one
`Apply*` op, which updates.py reads by its op-def; the ones below are written as scatter and
assign ops instead (TF1 Adam on an embedding, `GradientDescent` on one, contrib's `LazyAdam`,
`AddSign`/`PowerSign` on rows), or transform the gradient before the op (contrib's `LARS`), or
decay the variable beside it (contrib's `AdamW`/`MomentumW`): for those the note says what the
graph cannot. A method of a class not named here is the program's own: a hand-written update.
Python 3.7 syntax.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .updates import Update, variable_name

_TF = "tensorflow.python.training."
_CONTRIB = "tensorflow.contrib.opt.python.training."
# The class that wraps another's update with decoupled weight decay (`var -= weight_decay * var`
# first, on the gathered rows for a sparse gradient), whichever optimizer it extends.
DECAY = _CONTRIB + "weight_decay_optimizers.DecoupledWeightDecayExtension"


@dataclass
class Applied:
    """One variable's update as apply_gradients built it (noted by optimizer.py)."""

    optimizer: Any
    var: Any  # the variable object
    given: Any  # the gradient apply_gradients was given: a Tensor or IndexedSlices
    resource: bool
    method: str  # the method that built it: "_apply_dense", "_apply_sparse", "_resource_apply_sparse", ...
    definers: Tuple[str, ...]  # the classes defining `method`, "module.Class", in method-resolution order
    first: int  # the graph's version (its ops counted) before the call
    last: int = 0  # ... and after it: the call made the ops between
    consumed: Any = None  # (values, indices) after rows were summed by index, where they were
    slots: Dict[str, Any] = field(default_factory=dict)  # TF1 slot name ("m", "accum") -> variable
    state: Dict[str, Any] = field(default_factory=dict)  # non-slot variables ("beta1_power") -> variable
    scalars: Dict[str, Any] = field(default_factory=dict)  # the optimizer's attributes: tensors and numbers

    @property
    def sparse(self) -> bool:
        return hasattr(self.given, "indices")

    def ops(self) -> List[Any]:
        """The ops the call created, in creation order."""
        graph = self.var.graph
        return graph.get_operations()[self.first:self.last]  # by creation; a graph's version counts its ops


@dataclass(frozen=True)
class Path:
    """An update made of scatter and assign ops (or a transformed gradient), as the audit knows it."""

    kind: str  # the update's name in the golden: "ScatterAdam" ("ResourceScatterAdam" on a resource variable)
    lr: str  # the optimizer attribute holding the learning-rate tensor
    slots: Tuple[Tuple[str, str], ...] = ()  # (TF1 slot name, the rule's argument)
    hyper: Tuple[Tuple[str, str], ...] = ()  # (the rule's argument, the optimizer attribute)
    state: Tuple[str, ...] = ()  # non-slot variables the rule reads (Adam's beta powers)


_ADAM = dict(lr="_lr_t", slots=(("m", "m"), ("v", "v")),
             hyper=(("beta1", "_beta1_t"), ("beta2", "_beta2_t"), ("epsilon", "_epsilon_t")),
             state=("beta1_power", "beta2_power"))
_SIGN = dict(lr="_lr_t", slots=(("m", "m"),))
# (defining class, whether the gradient is sparse) -> the path its method writes.
KNOWN: Dict[Tuple[str, bool], Path] = {
    (_TF + "adam.AdamOptimizer", True): Path("ScatterAdam", **_ADAM),
    (_TF + "gradient_descent.GradientDescentOptimizer", True): Path("ScatterGradientDescent",
                                                                   "_learning_rate_tensor"),
    (_CONTRIB + "lazy_adam_optimizer.LazyAdamOptimizer", True): Path("ScatterLazyAdam", **_ADAM),
    (_CONTRIB + "addsign.AddSignOptimizer", True): Path(
        "ScatterAddSign", hyper=(("alpha", "_alpha_t"), ("sign_decay", "_sign_decay_t"), ("beta", "_beta_t")),
        **_SIGN),
    (_CONTRIB + "powersign.PowerSignOptimizer", True): Path(
        "ScatterPowerSign", hyper=(("logbase", "_logbase_t"), ("sign_decay", "_sign_decay_t"), ("beta", "_beta_t")),
        **_SIGN),
    (_CONTRIB + "lars_optimizer.LARSOptimizer", False): Path(
        "LARSMomentum", "_learning_rate_tensor", slots=(("momentum", "accum"),),
        hyper=(("momentum", "_momentum"), ("weight_decay", "_weight_decay"), ("eeta", "_eeta"),
               ("epsilon", "_epsilon"))),
}
WRITERS = ("Assign", "AssignAdd", "AssignSub", "ScatterAdd", "ScatterSub", "ScatterUpdate", "AssignVariableOp",
           "AssignAddVariableOp", "AssignSubVariableOp", "ResourceScatterAdd", "ResourceScatterSub",
           "ResourceScatterUpdate")


@dataclass
class Reading:
    """What the notes say of one variable's update: the Update to record where the graph's own
    reading is not it (None: keep that), the decay beside it, and the ops that make the decay."""

    update: Optional[Update] = None
    decay: Any = None  # the weight decay's tensor or number
    decay_ops: Tuple[str, ...] = ()


def read(applied: Applied) -> Reading:
    """What `applied` is, from the classes that define the method it took."""
    definers = list(applied.definers)
    reading = Reading()
    if definers and definers[0] == DECAY:
        definers.pop(0)
        reading.decay = applied.scalars.get("_weight_decay")
        reading.decay_ops = tuple(op.name for op in _decay_ops(applied))
    if not definers:
        return reading
    if not definers[0].startswith(("tensorflow.", "tensorflow_core.")):  # the program's own: hand-written
        return reading
    path = KNOWN.get((definers[0], applied.sparse))
    if path is not None:
        reading.update = _update(applied, path)
    return reading


def _update(applied: Applied, path: Path) -> Optional[Update]:
    ops = applied.ops()
    var = applied.var.name
    writers = [op for op in ops if op.type in WRITERS and variable_name(op.inputs[0]) == var]
    applies = [op for op in ops if op.type.startswith(("Apply", "ResourceApply")) and op.inputs
               and variable_name(op.inputs[0]) == var]
    op = (applies or writers or [None])[-1]
    if op is None:
        return None
    kind = ("Resource" if applied.resource else "") + path.kind
    if applied.sparse:
        values, indices = applied.consumed or (_values(applied.given), applied.given.indices)
        grad: Any = values
    else:
        grad, indices = applied.given, None
    roles = {applied.slots[name].name: arg for name, arg in path.slots if name in applied.slots}
    state = {name: applied.state[name].name for name in path.state if name in applied.state}
    hyper = {arg: applied.scalars[attr] for arg, attr in path.hyper if attr in applied.scalars}
    lr = applied.scalars.get(path.lr)
    update = Update(op, kind, var, grad=grad, indices=indices, lr=lr if hasattr(lr, "op") else None,
                    roles=roles, state=list(state.values()), hyper=hyper)
    update.state = state
    if path.kind == "LARSMomentum":  # its trust ratio scales the rate of variables its skip list does not name
        skip = applied.scalars.get("_skip_list")
        update.hyper["scaled"] = float(skip is None or not any(s in applied.var.name for s in skip))
    return update


def _values(grad: Any) -> Any:
    return getattr(grad, "values", grad)


def _decay_ops(applied: Applied) -> List[Any]:
    """The ops that decay the variable: those of the call that write it and read no gradient."""
    var = applied.var.name
    grads = {_values(applied.given).op.name}
    if applied.consumed is not None:
        grads.add(applied.consumed[0].op.name)
    out = []
    for op in applied.ops():
        if op.type in WRITERS and variable_name(op.inputs[0]) == var and not _reads(op, grads):
            out.append(op)
    return out


def _reads(op: Any, names: set, limit: int = 200) -> bool:
    """Does `op` read (through data edges) an op named in `names`?"""
    seen, stack = set(), [t.op for t in op.inputs]
    while stack and len(seen) < limit:
        o = stack.pop()
        if o.name in names:
            return True
        if o.name in seen:
            continue
        seen.add(o.name)
        stack.extend(t.op for t in o.inputs)
    return False
