"""Training steps made of several runs: gradients accumulated over micro-batches.

The usual TF1 form has three kinds of run: one zeroes accumulator variables, N each add one
micro-batch's gradients to them (`accum.assign_add(grad)`), one applies what they hold (summed, or
divided by N, maybe clipped) with an optimizer's `apply_gradients`. The graph says which is which:

- an accumulator is a variable no optimizer trains whose assign_add adds a value computed from a
  trainable variable's gradient (noted where the program took it: optimizer.py), or a
  tf.compat.v1.ConditionalAccumulator whose apply_grad adds one (its take_grad is their mean);
- a micro-batch run is a run that adds to an accumulator and updates no trainable variable;
- the step is the run whose update reads an accumulator.

A micro-batch run records what a step records of its inputs, random draws, taps and loss, and
its gradient of each variable ("grad/<var>@micro"); the step that applies them holds each
micro-batch's values stacked along a first axis of length N (recorder.py), beside its own
gradient, the accumulated one its update read. Python 3.7 syntax.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Dict, List, Mapping, Set, Tuple

import numpy as np

from ..keys import MICRO, UNCLIPPED, make_key, split_key
from .updates import Update, pushed_by_a_worker, variable_name

ADDS = frozenset(["AssignAdd", "AssignAddVariableOp"])
# tf.compat.v1.ConditionalAccumulator: apply_grad adds a gradient, take_grad returns their mean
PUSHES = frozenset(["AccumulatorApplyGradient", "ResourceAccumulatorApplyGradient"])
ACCUMULATOR_OPS = frozenset(["ConditionalAccumulator", "ResourceConditionalAccumulator"])
REACH = 48  # ops walked back from an assign_add's value to a gradient, or from an update's gradient to an accumulator
ACCUMULATE = "accumulate"  # the kind of the Update a micro-batch run's addition is read as


def accumulators(graph: Any, trainable: Set[str], gradients: Mapping[str, Any]) -> Dict[str, Tuple[str, Any]]:
    """{accumulator variable: (the trainable variable whose gradient it sums, that gradient)}.
    `gradients`: each trainable variable's gradient tensors where the program took them (a dense
    tensor, or IndexedSlices)."""
    by_op: Dict[str, Tuple[str, Any]] = {}
    for var, grads in gradients.items():
        for grad in grads:
            by_op[getattr(grad, "values", grad).op.name] = (var, grad)
    out: Dict[str, Tuple[str, Any]] = {}
    for op in graph.get_operations():
        target, added = _addition(op)
        if target is None or target in trainable or target in out:
            continue
        found = _reaches(added.op, by_op)
        if found is not None:
            var, grad = found
            # a micro-batch's gradient as taken; an IndexedSlices' rows as the addition made them dense
            out[target] = (var, added if hasattr(grad, "indices") else grad)
    return out


def _addition(op: Any) -> Tuple[Any, Any]:
    """(the accumulator `op` adds to, the value it adds), or (None, None): an assign_add to a
    variable, or a ConditionalAccumulator's apply_grad (named by its accumulator op: the
    SyncReplicasOptimizer's, shared as "<variable>/grad_accum", are a worker's step instead)."""
    if op.type in ADDS:
        return variable_name(op.inputs[0]), op.inputs[1]
    if op.type in PUSHES and op.inputs[0].op.type in ACCUMULATOR_OPS and not pushed_by_a_worker(op):
        return op.inputs[0].op.name + ":0", op.inputs[2]
    return None, None


def additions(executed: List[Any], accumulated: Mapping[str, Tuple[str, Any]]) -> List[Update]:
    """The additions a run makes to accumulators, read as updates of their variables: the
    variable, and the micro-batch's gradient of it."""
    out = []
    for op in executed:
        target, _ = _addition(op)
        if target in accumulated:
            var, grad = accumulated[target]
            out.append(Update(op, ACCUMULATE, var, grad=grad))
    return out


def read_accumulators(updates: List[Update], accumulated: Mapping[str, Any],
                      unclipped: Mapping[str, Any]) -> Dict[str, str]:
    """{trainable variable: accumulator} for the updates whose gradient reads an accumulator (the
    nearest one read, from what tf.clip_by_global_norm was given where it clipped the gradient:
    `unclipped`, a clipped tensor's name -> it, as every clipped gradient reads all of them)."""
    out = {}
    for update in updates:
        if update.var is None or update.grad is None:
            continue
        grad = getattr(update.grad, "values", update.grad)
        grad = unclipped.get(grad.name, grad)
        for name in _variables_read(grad.op):
            if name in accumulated:
                out[update.var] = name
                break
    return out


def _reaches(op: Any, targets: Mapping[str, Any]) -> Any:
    """The value `targets` maps the first op upstream of `op` (itself included) named in it to."""
    seen, stack = set(), [op]
    while stack and len(seen) < REACH:
        op = stack.pop()
        if op.name in targets:
            return targets[op.name]
        if op.name in seen:
            continue
        seen.add(op.name)
        stack.extend(t.op for t in op.inputs)
    return None


def _variables_read(op: Any) -> List[str]:
    """The variables read upstream of `op` (within REACH ops), nearest first."""
    out, seen, queue = [], set(), collections.deque([op])
    while queue and len(seen) < REACH:
        op = queue.popleft()
        if op.name in seen:
            continue
        seen.add(op.name)
        if op.type in ("VariableV2", "VarHandleOp", "Variable") or op.type in ACCUMULATOR_OPS:
            out.append(op.name + ":0")
            continue
        queue.extend(t.op for t in op.inputs)
    return out


class MicroBatches:
    """The micro-batch runs since the last step: their feeds and values, until the step that
    applies them takes them (stacked)."""

    def __init__(self) -> None:
        self.runs: List[Tuple[List[Tuple[str, Any]], List[Tuple[str, Any]]]] = []  # (feeds, values) of each
        self.changed: Set[str] = set()  # the variables micro-batch runs change (accumulators, loss totals)

    def add(self, feeds: List[Tuple[str, Any]], values: List[Tuple[str, Any]], changed: List[str]) -> None:
        self.runs.append((list(feeds), list(values)))
        self.changed.update(changed)

    def merged(self, plan: Any, feeds: List[Tuple[str, Any]], values: List[Tuple[str, Any]],
               warn: Callable[[str], None]) -> Tuple[int, List[Tuple[str, Any]], List[Tuple[str, Any]]]:
        """(how many micro-batch runs the step of `plan` applies, its feeds and values with theirs
        stacked along a first axis added); a step whose update reads no accumulator takes none,
        and runs it leaves are said in a warning."""
        if not plan.accumulated:
            if self.runs:
                warn("micro-batch runs were followed by a step whose update reads no accumulator they added to: "
                     "their inputs and losses are not recorded")
                self.take()
            return 0, feeds, values
        count, micro_feeds, micro_values, dropped = self.take()
        if dropped:
            warn("micro-batch values of unequal shapes over a step's runs are not recorded: %s"
                 % ", ".join(sorted(dropped)))
        own, taken = {name for name, _ in feeds}, {key for key, _ in values}
        return (count, feeds + [(name, value) for name, value in micro_feeds if name not in own],
                values + [(key, value) for key, value in micro_values if key not in taken])

    def meta(self, plan: Any, count: int, values: List[Tuple[str, Any]]) -> Dict[str, Any]:
        """meta["accumulation"]: each accumulator's variable, every variable micro-batch runs change,
        and how the gradient each update read is made of the micro-batches' ("sum", "mean", None:
        otherwise), checked at the first step (the gradient before clipping, where it was clipped)."""
        held = dict(values)
        forms = {}
        for var in sorted(plan.accumulated):
            applied = held.get(make_key("grad", var + UNCLIPPED), held.get(make_key("grad", var)))
            added = held.get(make_key("grad", var + MICRO))
            forms[var] = None if applied is None or added is None else form(applied, added, count)
        return {"micro_batches": count, "accumulators": {acc: var for var, acc in sorted(plan.accumulated.items())},
                "state": sorted(self.changed), "form": forms}

    def take(self) -> Tuple[int, List[Tuple[str, Any]], List[Tuple[str, Any]], List[str]]:
        """(how many runs, their feeds and their values stacked along a first axis, what could not be
        stacked); the runs are forgotten."""
        runs, self.runs = self.runs, []
        if not runs:
            return 0, [], [], []
        feeds, dropped = _stacked([f for f, _ in runs])
        values, more = _stacked([v for _, v in runs])
        return len(runs), feeds, values, dropped + more


def _stacked(runs: List[List[Tuple[str, Any]]]) -> Tuple[List[Tuple[str, Any]], List[str]]:
    """Each name's values over the runs, stacked (names some run lacks, or whose shapes differ, left out)."""
    names = [name for name, _ in runs[0]]
    out, dropped = [], []
    for name in names:
        values = [dict(run).get(name) for run in runs]
        arrays = [np.asarray(v) for v in values if v is not None]
        if len(arrays) != len(runs) or len({a.shape for a in arrays}) != 1 or arrays[0].dtype == object:
            dropped.append(name)
            continue
        out.append((name, np.stack(arrays)))
    return out, dropped


def held_with(plan: Any, feeds: List[Tuple[str, Any]], values: List[Tuple[str, Any]]) -> Dict[str, int]:
    """What a step with micro-batch runs holds (store/held.py), theirs counted."""
    held = {kind: sum(1 for key, _ in values if split_key(key)[0] == kind) for kind in plan.held}
    held.update(input=len(feeds), grad=plan.held.get("grad", 0))
    return held


def form(applied: Any, added: Any, micro_batches: int) -> "str | None":
    """How the gradient an update read is made of what the micro-batches added: "sum", "mean",
    or None (clipped, or scaled otherwise): checked within float32 round-off of the sum."""
    applied, total = np.asarray(applied, np.float64), np.sum(np.asarray(added, np.float64), axis=0)
    if applied.shape != total.shape or not applied.size:
        return None
    scale = float(np.max(np.abs(total))) or 1.0
    allowed = 4 * np.finfo(np.float32).eps * micro_batches * scale
    if np.max(np.abs(applied - total)) <= allowed:
        return "sum"
    if np.max(np.abs(applied * micro_batches - total)) <= allowed * 2:
        return "mean"
    return None
