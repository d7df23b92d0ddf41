"""Which tensor a training run's gradients were taken of: its loss.

The loss is what the program handed to the differentiation: `tf.gradients(ys, ...)`,
`Optimizer.compute_gradients(loss)` / `minimize(loss)`, Keras' `get_gradients(loss, ...)`
(noted by optimizer.py while the graph is built), each paired with the variables it gave
gradients for. The shape of the gradient graph does not say it: the gradient of a sum hands
its seed unchanged to every addend, so the first op that consumes the seed belongs to an
addend, not to the total. Where nothing was noted (the graph was built before recording
started), the loss is inferred from the seed: the nearest forward op downstream of every op
whose gradient reads the seed. That inference, like every other answer here, is checked at
the first step of its kind by selfcheck.py, which also looks among `candidates` for the
tensor whose gradients the run really computed. Python 3.7 syntax.
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

from .declared import Declared, find_tensor
from .updates import GRADIENTS_SCOPE, Update, is_gradient_seed
from .walk import pure, unique, unique_ops

# How a loss was found, as the golden's metadata says it.
DECLARED, DIFFERENTIATED, SEED = "declared", "differentiated", "inferred from the gradient seed"
# Ops a total is made of its parts with: where a loss that fails the check looks for the sum it missed.
_SUMS = frozenset(["Add", "AddV2", "AddN", "Sub", "Mul", "RealDiv", "Neg", "Identity", "Mean", "Sum"])


def run_losses(graph: Any, declared: Declared, notes: Dict[str, list], updates: List[Update], executed: List[Any],
               fed: FrozenSet[str]) -> List[Tuple[Any, str]]:
    """(loss tensor, how it was found) for each loss a run's updates were computed from."""
    names = {op.name for op in executed}
    stated = [t for t in (find_tensor(graph, n) for n in declared.losses) if t is not None]
    stated = [t for t in stated if t.op.name in names or pure(t, names, fed)]
    if stated:
        return [(t, DECLARED) for t in unique(stated)]
    updated = {u.var for u in updates if u.var is not None}
    found = [loss for var, grad, loss in notes["derivative"]
             if var in updated and _op(grad).name in names and (loss.op.name in names or pure(loss, names, fed))]
    if found:
        return [(t, DIFFERENTIATED) for t in unique(found)]
    inferred = [t for t in seed_losses(executed) if t.op.name in names or pure(t, names, fed)]
    return [(t, SEED) for t in unique(inferred)]


def derivatives(notes: Dict[str, list], loss: Any, updated: Iterable[str], names: Set[str]) -> Dict[str, Any]:
    """{variable name: the gradient (a tensor or IndexedSlices) the differentiation of `loss` gave
    it}, for the variables the run updates."""
    updated = set(updated)
    return {var: grad for var, grad, of in notes["derivative"]
            if of.name == loss.name and var in updated and _op(grad).name in names}


def seed_losses(ops: Iterable[Any]) -> List[Any]:
    """The `ys` of each tf.gradients call among `ops`, inferred from its seed ("<scope>gradients/
    Fill"): the nearest forward op downstream of (or equal to) every op whose gradient reads it."""
    out = []
    for op in ops:
        if op.type != "Fill" or not is_gradient_seed(op):
            continue
        scope = op.name[:-len(op.name.split("/")[-1])]
        graph = op.graph
        forward = []
        for consumer in op.outputs[0].consumers():
            rest = consumer.name[len(scope):] if consumer.name.startswith(scope) else ""
            if "_grad/" not in rest:
                continue
            try:
                forward.append(graph.get_operation_by_name(rest.split("_grad/")[0]))
            except (KeyError, ValueError):
                continue
        found = _nearest_common(forward)
        if found is not None and found.outputs:
            out.append(found.outputs[0])
    return out


def candidates(loss: Any, notes: Dict[str, list]) -> List[Any]:
    """What a loss that fails the self-check may be instead, nearest first: totals it is part of,
    the other tensors the program differentiated, the seeds' inferred ys."""
    noted = [t for t in notes["loss"]] + [of for _, _, of in notes["derivative"]]
    seeds = seed_losses(op for op in loss.graph.get_operations())
    return [t for t in unique(sum_candidates(loss) + noted + seeds) if t.name != loss.name]


def sum_candidates(loss: Any, depth: int = 6) -> List[Any]:
    """Scalars a loss is part of (a total it is an addend of, a scaled or averaged loss), nearest
    first: where a recorded loss whose gradients are not the run's looks for the one that is."""
    out, frontier, seen = [], [loss.op], {loss.op.name}
    for _ in range(depth):
        following = []
        for op in frontier:
            for tensor in op.outputs:
                for consumer in tensor.consumers():
                    if consumer.name in seen or _in_gradients(consumer) or consumer.type not in _SUMS:
                        continue
                    seen.add(consumer.name)
                    following.append(consumer)
                    result = consumer.outputs[0]
                    if result.dtype.is_floating and result.shape.ndims == 0:
                        out.append(result)
        frontier = following
    return out


def _nearest_common(ops: List[Any], limit: int = 20000) -> Optional[Any]:
    """The first-made op downstream of (or equal to) each of `ops`: an op is made after its
    inputs, so no other common op is upstream of it."""
    common: Optional[Set[str]] = None
    for op in unique_ops(ops):
        reach = _forward(op, limit)
        common = reach if common is None else common & reach
    if not common:
        return None
    graph = ops[0].graph
    return min((graph.get_operation_by_name(n) for n in common), key=lambda o: o._id)


def _forward(op: Any, limit: int) -> Set[str]:
    """`op` and the forward ops downstream of it (not the gradient graph's)."""
    seen: Set[str] = set()
    stack = [op]
    while stack and len(seen) < limit:
        op = stack.pop()
        if op.name in seen or _in_gradients(op):
            continue
        seen.add(op.name)
        stack.extend(c for t in op.outputs for c in t.consumers())
    return seen


def _in_gradients(op: Any) -> bool:
    return any(GRADIENTS_SCOPE.match(part) for part in op.name.split("/")[:-1])


def _op(grad: Any) -> Any:
    """The op computing a gradient (an IndexedSlices' values)."""
    return getattr(grad, "values", grad).op


# Ops a loss adds and scales its parts with, constants aside: where its terms are found (loss_terms).
_ADDS, _SCALES = frozenset(["Add", "AddV2", "Sub", "AddN", "Neg", "Identity"]), frozenset(["Mul", "RealDiv"])
MAX_TERMS = 16


def loss_terms(loss: Any, static_value: Any) -> Tuple[List[Tuple[Any, float]], float]:
    """The scalar addends of a loss and their constant coefficients, and the constant added,
    loss = sum of c_i t_i + offset, where the loss is such a sum of at least two tensors (A2C's
    pg_loss - ent_coef * entropy + vf_coef * vf_loss), through Add, Sub, AddN, Neg, Identity and
    products or quotients by a constant scalar (`static_value(tensor)`: its constant value, or
    None); ([], 0) where it is not, or where a part is not a float scalar. The recorder checks the
    sum at the first step: a claim of its own."""
    terms: List[Tuple[Any, float]] = []
    offset = [0.0]

    def constant(tensor: Any) -> Optional[float]:
        value = static_value(tensor)
        return float(value) if value is not None and getattr(value, "size", 1) == 1 else None

    def walk(tensor: Any, coefficient: float, depth: int) -> bool:
        op = tensor.op
        if depth > 2 * MAX_TERMS or len(terms) > MAX_TERMS:
            return False
        fixed = constant(tensor)
        if fixed is not None:  # a constant added: no part a port could scale
            offset[0] += coefficient * fixed
            return True
        if op.type in _ADDS and op.inputs:
            signs = [1.0, -1.0] if op.type == "Sub" else [-1.0] if op.type == "Neg" else [1.0] * len(op.inputs)
            return all(walk(part, coefficient * sign, depth + 1) for part, sign in zip(op.inputs, signs))
        if op.type in _SCALES and len(op.inputs) == 2:
            right = constant(op.inputs[1])
            left = constant(op.inputs[0]) if op.type == "Mul" else None
            if right is not None and right != 0:
                return walk(op.inputs[0], coefficient * (right if op.type == "Mul" else 1.0 / right), depth + 1)
            if left is not None:
                return walk(op.inputs[1], coefficient * left, depth + 1)
        if tensor.shape.ndims != 0 or not tensor.dtype.is_floating:
            return False
        terms.append((tensor, coefficient))
        return True
    return (terms, offset[0]) if walk(loss, 1.0, 0) and len(terms) >= 2 else ([], 0.0)
