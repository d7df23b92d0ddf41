"""Every update of a graph's variables, as found once per version of the graph: the updates
an optimizer made (its update ops, read anew where its apply_gradients was seen building one the
op alone does not tell: paths.py), the hand-written ones (assign ops computed from gradients:
updates.py), the accumulators of micro-batch runs (accumulation.py), and what the golden's
metadata says of them (each update's facts, each slot's role). graph.py plans runs from these.
Python 3.7 syntax."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from . import paths
from .accumulation import accumulators
from .declared import Declared, find_tensor
from .notes import intercepted
from .updates import ASSIGN_OPS, ASSIGNED, Update, advances, assigned_updates, op_updates, variable_name
from .walk import fixed, number, unique

Evaluate = Callable[[List[Any]], List[Any]]  # tensors -> their values, read in a run of their own


class GraphUpdates:
    """The updates of one graph, each kind found again only when the graph has grown."""

    def __init__(self, graph: Any, tf: Any, declared: Declared) -> None:
        self.graph = graph
        self._tf = tf
        self.declared = declared
        self._cached: Dict[str, Tuple[int, Any]] = {}  # kind -> (graph version, what was found)

    def _once(self, kind: str, find: Callable[[], Any]) -> Any:
        found = self._cached.get(kind)
        if found is None or found[0] != self.graph.version:
            found = self._cached[kind] = (self.graph.version, find())
        return found[1]

    def all(self) -> List[Update]:
        """Every update of a variable in the graph: optimizer updates and hand-written ones."""
        return self.known() + self.assigned()

    def known(self) -> List[Update]:
        """The updates an optimizer made: its update ops, read anew where apply_gradients was seen
        making an update the op alone does not tell (scatter and assign ops, a transformed
        gradient, weight decay beside the op)."""
        return self._once("known", self._known)

    def _known(self) -> List[Update]:
        readings = {applied.var.name: paths.read(applied) for applied in intercepted(self.graph)["applied"]}
        updates = []
        for update in op_updates(self.graph):
            reading = readings.get(update.var or "")
            if reading is not None and reading.update is not None and reading.update.op.name == update.op.name:
                update = reading.update  # the op, with the gradient the optimizer was given
            updates.append(update)
        taken = {u.op.name for u in updates}
        updates += [r.update for r in readings.values() if r.update is not None and r.update.op.name not in taken]
        for update in updates:
            reading = readings.get(update.var or "")
            if reading is not None and reading.decay is not None:
                update.decay, update.decay_ops = reading.decay, reading.decay_ops
        return updates

    def assigned(self) -> List[Update]:
        """The graph's hand-written updates (updates.py), of the variables no optimizer updates."""
        return self._once("assigned", self._assigned)

    def _assigned(self) -> List[Update]:
        notes = intercepted(self.graph)
        known = {u.var for u in self.known()}
        trainable = {v.name for v in self._trainable() if v.name not in known}
        gradients = {name: grad for name, grad in notes["gradient"]}
        for var, name in self.declared.gradients:  # the user's word over what was seen
            grad = find_tensor(self.graph, name)
            if grad is not None:
                gradients[var] = grad
        clipped = {grad.name: after for grad, after in notes["clipped"]}
        sparse = {name: grad for name, grad in notes["sparse"] if name not in gradients}
        return assigned_updates(self.graph, trainable, gradients, clipped, sparse)

    def accumulators(self) -> Dict[str, Tuple[str, Any]]:
        """{accumulator variable: (the trainable variable whose gradients micro-batch runs add to
        it, the gradient)} (accumulation.py)."""
        return self._once("accumulators", self._accumulators)

    def _accumulators(self) -> Dict[str, Tuple[str, Any]]:
        notes = intercepted(self.graph)
        gradients: Dict[str, List[Any]] = {}
        for name, grad in notes["gradient"] + notes["sparse"]:
            gradients.setdefault(name, []).append(grad)
        return accumulators(self.graph, {v.name for v in self._trainable()}, gradients)

    def _trainable(self) -> List[Any]:
        return self.graph.get_collection(self._tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)

    # ---- what the golden's metadata says of them ------------------------------------------------

    def slot_roles(self) -> Dict[str, Dict[str, str]]:
        """{slot name: {"var", "update", "arg"}}: each slot's variable, the update's type and the
        argument the slot is, so a replay pairs slots by what they are, not by their names (an
        optimizer given its own name names its slots after it)."""
        out: Dict[str, Dict[str, str]] = {}
        for update in self.all():
            if update.var is not None:
                for slot, arg in update.roles.items():
                    out.setdefault(slot, {"var": update.var, "update": update.kind, "arg": arg})
        return out

    def facts(self, evaluate: Optional[Evaluate] = None) -> Dict[str, Dict[str, Any]]:
        """{variable name: {"update": its type (ASSIGNED for a hand-written one), "lr": the
        learning-rate tensor's name, "hyper": {argument: value}, "state": {argument: variable}
        (Adam's beta powers), "attrs": {attribute: bool} (use_nesterov, ...), "decay" where
        decoupled weight decay comes first, "also": [the other assign ops that move the variable
        from its own value, where there are any]}} of every update: a replay pairs each TF2
        optimizer with the learning rate the updates of its variables read, and compares its
        settings with the constant ones; the audit (store/audit.py) recomputes the update.
        `evaluate`: for hyperparameters the graph computes from constants (TF 2's Ftrl adjusts
        its l2 so), read in one run of their own."""
        out: Dict[str, Dict[str, Any]] = {}
        moves: Dict[str, List[str]] = {}  # variable -> the assign ops that move it from its own value
        for op in self.graph.get_operations():
            if op.type in ASSIGN_OPS and advances(op):
                moves.setdefault(variable_name(op.inputs[0]) or "", []).append(op.name)
        computed = self._computed(evaluate)
        for update in self.all():
            if update.var is None or update.var in out:
                continue
            hyper = {}
            for arg, tensor in update.hyper.items():
                value = number(self._tf, tensor)
                if value is None:
                    value = computed.get(getattr(tensor, "name", None))
                if value is not None:
                    hyper[arg] = value
            attrs = {}
            for attr in ("use_nesterov", "update_slots", "multiply_linear_by_lr", "use_locking"):
                try:
                    attrs[attr] = bool(update.op.get_attr(attr))
                except (ValueError, TypeError):
                    continue  # the op has no such attribute
            out[update.var] = {"update": update.kind, "lr": getattr(update.lr, "name", None), "hyper": hyper,
                               "state": dict(update.state), "attrs": attrs}
            if update.decay is not None:  # decoupled weight decay first, by the rate recorded (None: not fixed)
                out[update.var]["decay"] = number(self._tf, update.decay)
            also = [name for name in moves.get(update.var, []) if name != update.op.name
                    and name not in update.decay_ops]
            if also and update.kind != ASSIGNED:  # another assign beside the update op
                out[update.var]["also"] = also
        return out

    def _computed(self, evaluate: Optional[Evaluate]) -> Dict[str, float]:
        """Hyperparameters that are no graph constant but computed from constants alone: tensor
        name -> value, read with `evaluate` once."""
        if evaluate is None:
            return {}
        wanted = unique([t for u in self.all() for t in u.hyper.values()
                         if hasattr(t, "op") and number(self._tf, t) is None and fixed(t)])
        try:
            values = evaluate(wanted) if wanted else []
        except Exception:  # a value that cannot be read is not recorded: the audit says so
            return {}
        return {t.name: float(v) for t, v in zip(wanted, values) if getattr(v, "size", 1) == 1}


def update_targets(updates: List[Any], executed: List[Any]) -> List[str]:
    """The ops of a run that change its updates' variables and slots (and state such as Adam's
    beta powers): the update ops, and the assign and scatter ops on those variables."""
    moved = {name for u in updates for name in [u.var] + list(u.slots) if name is not None}
    out = [u.op.name for u in updates]
    for op in executed:
        if op.type in ASSIGN_OPS or op.type.startswith(("Scatter", "ResourceScatter")):
            if op.inputs and variable_name(op.inputs[0]) in moved and op.name not in out:
                out.append(op.name)
    return out
