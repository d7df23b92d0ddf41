"""Walks over a TF1 graph's data edges (updates.py reads the updates with them): what an op is
computed from, what consumes it, and which of some target ops an op reads through what the
gradients flow through, answered once per op. Python 3.7 syntax."""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, Iterable, Optional, Set

PASS_THROUGH = frozenset(["Identity", "ReadVariableOp", "Enter", "RefEnter", "Switch", "RefSwitch"])
LOOP_BACK = frozenset(["NextIteration", "RefNextIteration"])  # the only edges that close a loop in a TF1 graph


def upstream(op: Any, within: Optional[Set[str]] = None, limit: Optional[int] = None) -> Set[str]:
    """The names of `op` and of the ops its inputs come from (data edges), transitively (the first
    `limit` of them). With `within` (what gradients flow through), only through those: past
    them, only to the variable an op reads (a read of a slot is seen, the forward pass is not
    walked)."""
    seen: Set[str] = set()
    stack = [op]
    while stack and (limit is None or len(seen) < limit):
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if within is None or op.name in within:
            stack.extend(t.op for t in op.inputs if t.op.name not in seen)
        elif op.type in PASS_THROUGH and op.inputs:
            stack.append(op.inputs[0].op)
    return seen


def downstream(ops: Iterable[Any]) -> Set[str]:
    """The names of `ops` and of every op that consumes their outputs, transitively."""
    seen: Set[str] = set()
    stack = list(ops)
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        for tensor in op.outputs:
            stack.extend(c for c in tensor.consumers() if c.name not in seen)
    return seen


class Above:
    """Which of `targets` (op names) an op's value is computed from, walking up through what the
    gradients flow through (`derived`) as upstream(op, derived) does. Each update's walk would
    cover the whole backward pass (a clipped gradient reads every gradient through the global
    norm): 11 s of BERT-base's recording for its 600 hand-written updates and slots. Here each
    op's answer is made once from its inputs' (the backward pass's own ops share one empty set).
    A graph whose derived part has a loop (a while loop's NextIteration) is walked per op."""

    def __init__(self, derived: Set[str], targets: Set[str], graph: Any) -> None:
        self._derived, self._targets = derived, frozenset(targets)
        self._memo: Dict[str, FrozenSet[str]] = {}
        self._looped = any(op.type in LOOP_BACK for op in graph.get_operations() if op.name in derived)

    def __call__(self, op: Any) -> FrozenSet[str]:
        if self._looped:
            return frozenset(upstream(op, self._derived) & self._targets)
        memo, derived = self._memo, self._derived
        stack = [(op, False)]
        while stack:
            node, ready = stack.pop()
            if node.name in memo:
                continue
            if node.name not in derived:  # read, not walked past (but for a pass-through chain)
                memo[node.name] = frozenset(upstream(node, derived) & self._targets)
                continue
            inputs = [t.op for t in node.inputs]
            if not ready:
                stack.append((node, True))
                stack.extend((i, False) for i in inputs if i.name not in memo)
                continue
            found = {node.name} & self._targets
            parts = [memo[i.name] for i in inputs]
            widest = max(parts, key=len, default=frozenset())
            if found or any(not part <= widest for part in parts):
                memo[node.name] = frozenset(found.union(*parts))
            else:
                memo[node.name] = widest  # shared, not copied
        return memo[op.name]
