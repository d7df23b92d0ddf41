"""Walking a TF1 graph: the ops a run executes, whether an op draws random numbers, which
learning rates read the step counter unordered with its increment, and scalar constants the
graph fixes. graph.py builds a run's plan from these."""

from __future__ import annotations

import heapq
import re
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Set, Tuple

import numpy as np

from .updates import ASSIGN_OPS, advances, variable_name

BRANCH_SCOPE = "tracekit_branch"  # where branch_value puts the Merges it adds to a program's graph
LOOP_PASSES = 16  # the passes of unordered_state_reads' ordering, at most (each crosses one level of loop back edges)
RANDOM_OPS = frozenset([
    "RandomUniform", "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal",
    "ParameterizedTruncatedNormal", "RandomGamma", "RandomPoisson", "RandomPoissonV2",
    "Multinomial", "RandomShuffle", "RandomCrop",
])
# Stateless draws (tf-keras Dropout on TF 2.x) are recorded too: a port may draw differently.
STATELESS_RANDOM = re.compile(r"^Stateless(Random|Truncated|Multinomial|ParameterizedTruncated)(?!.*GetKey|.*GetAlg)")

def is_random_draw(op: Any) -> bool:
    return (op.type in RANDOM_OPS and op.op_def.is_stateful) or bool(STATELESS_RANDOM.match(op.type))


def executed_ops(fetch_ops: Iterable[Any], fed: FrozenSet[str], control: bool = True) -> List[Any]:
    """The ops a run of `fetch_ops` executes: their ancestors through data and control
    edges, not looking past fed tensors (control=False: through data edges only, the ops
    whose values they need)."""
    seen: Dict[str, Any] = {}
    stack = list(fetch_ops)
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen[op.name] = op
        for tensor in op.inputs:
            if tensor.name not in fed and tensor.op.name not in seen:
                stack.append(tensor.op)
        for source in op.control_inputs if control else ():
            if source.name not in seen:
                stack.append(source)
    return list(seen.values())


def unordered_reads(rates: List[Any], counter: Any, executed: List[Any], fed: FrozenSet[str]) -> List[Dict[str, Any]]:
    """{"lr", "counter", "read", "increment"} for each learning rate whose value reads the step
    counter through an op that no dependency orders before or after the counter's increment in
    the same run: TF1 research code's `tf.group(apply_gradients(...), global_step.assign_add(1))`.
    Where the rate reads the counter more than once: "reads", every such racy read, and
    "ordered", its reads that are ordered against the increment."""
    increments = [op for op in executed if op.type in ASSIGN_OPS and variable_name(op.inputs[0]) == counter.name
                  and advances(op)]
    source = counter.op  # the variable op (VariableV2, VarHandleOp): its readers consume its output
    out = []
    for rate in rates:
        upstream = executed_ops([rate.op], fed)
        names = {op.name for op in upstream}
        reads = [op for op in upstream if op.type not in ASSIGN_OPS and any(t.op is source for t in op.inputs)]
        if source.type in ("VariableV2", "Variable"):
            # A ref variable's Identity ("global_step/read") forwards its buffer without copying it:
            # the value is taken when an op past the identities reads it.
            reads = past_identities(reads, names)
        racy, ordered = [], []  # (read, the increment it races), the reads ordered against every increment
        for read in reads:
            before = {op.name for op in executed_ops([read], fed)}
            raced = next((increment for increment in increments if increment.name not in before and read.name not in
                          {op.name for op in executed_ops([increment], fed)}), None)
            if raced is None:
                ordered.append(read.name)
            else:
                racy.append((read, raced))
        if racy:  # one race per learning rate says it
            race: Dict[str, Any] = {"lr": rate.name, "counter": counter.name, "read": racy[0][0].name,
                                    "increment": racy[0][1].name}
            if len(racy) > 1 or ordered:
                race.update(reads=[read.name for read, _ in racy], ordered=ordered)
            out.append(race)
    return out


def unordered_state_reads(recorded: Dict[str, Any], updates: Dict[str, List[Any]], executed: List[Any],
                          fed: FrozenSet[str], fetched: Iterable[Any] = ()) -> List[Dict[str, str]]:
    """{"tensor", "variable", "read", "update"} for each recorded tensor ("kind/name" -> tensor)
    whose value reads a variable the same run updates (`updates`: variable name -> the ops that
    change it) through a read that no dependency orders before or after that update: which value
    it sees is up to the scheduler (TF1 code that adds an L2 term of the weights to the loss it
    fetches, with gate_gradients off). One entry per recorded tensor.

    One pass each way over the run's ops, in an order that puts every op after what orders it
    (topological: the creation order, where a tf.cond's Switch or a while loop's gradient made
    an op after one it feeds), marks, as bits, which recorded tensors and updates each op precedes
    and which updates precede it; a while loop's back edges take more passes, until the marks hold
    (a body's value reaches its Exit only through the next iteration's Merge). A control edge
    orders only from an op whose value the run needs
    (a data path to what it fetches, `fetched`, the recorded tensors or the updates) or from a
    group relaying such orderings: Grappler prunes dead ops, and the orderings only they gave
    (a tf.tuple gate's gradient of a constant factor, which reads an L2 term) with them."""
    ops = sorted(executed, key=lambda op: op._id)
    names = {op.name for op in ops}
    roots = [t.op for t in recorded.values()] + [op for ops_ in updates.values() for op in ops_] + list(fetched)
    live = {op.name for op in executed_ops([op for op in roots if op.name in names], fed, control=False)}
    bit: Dict[str, int] = {}
    for var, changers in sorted(updates.items()):
        for op in changers:
            bit.setdefault(op.name, 1 << len(bit))
    targets = {}
    for key, tensor in recorded.items():
        if tensor.op.name in names:
            targets[key] = 1 << (len(bit) + len(targets))
            bit[tensor.op.name] = bit.get(tensor.op.name, 0) | targets[key]
    consumers: Dict[str, List[Any]] = {}
    sources: Dict[str, List[Any]] = {}  # the edges that order: data, and control from a live op
    for op in ops:
        # a group (NoOp: a tf.tuple gate, a train op) relays the orderings of its own live inputs
        ordering = [t.op for t in op.inputs if t.name not in fed] + [c for c in op.control_inputs
                                                                      if c.name in live or c.type == "NoOp"]
        sources[op.name] = ordering
        for source in ordering:
            consumers.setdefault(source.name, []).append(op)
    ops = topological(ops, sources)
    before: Dict[str, int] = {}  # what each op precedes (its own bits included)
    after: Dict[str, int] = {}  # the updates each op follows
    for _ in range(LOOP_PASSES):  # once, but for a while loop's back edges: again until nothing moves
        moved = _pass(reversed(ops), consumers, bit, before) | _pass(ops, sources, bit, after)
        if not moved:
            break
    changing = {op.name for changers in updates.values() for op in changers}
    by_name = {op.name: op for op in ops}
    out: List[Dict[str, str]] = []
    said: set = set()
    for var, changers in sorted(updates.items()):
        for read in _reads(by_name.get(var.rsplit(":", 1)[0]), names, changing):
            for key, target in targets.items():
                if key in said or not before[read.name] & target:
                    continue
                for op in changers:
                    if not before[read.name] & bit[op.name] and not after[read.name] & bit[op.name]:
                        out.append({"tensor": key, "variable": var, "read": read.name, "update": op.name})
                        said.add(key)
                        break
    return out


def _pass(ops: Iterable[Any], edges: Dict[str, List[Any]], bit: Dict[str, int], masks: Dict[str, int]) -> bool:
    """masks[op] |= its own bit and the masks of the ops `edges` gives it, in `ops` order;
    whether any mask grew."""
    moved = False
    for op in ops:
        mask = masks.get(op.name, 0) | bit.get(op.name, 0)
        for other in edges.get(op.name, ()):
            mask |= masks.get(other.name, 0)
        if mask != masks.get(op.name):
            masks[op.name], moved = mask, True
    return moved


def _back_edge(source: Any, op: Any) -> bool:
    """A while loop's edge from the end of its body to the start of the next iteration."""
    return op.type in ("Merge", "RefMerge") and source.type in ("NextIteration", "RefNextIteration")


def topological(ops: List[Any], sources: Dict[str, List[Any]]) -> List[Any]:
    """`ops` (in creation order) ordered so that each comes after its `sources` among them, a
    while loop's back edges aside: an op keeps its place unless one of its sources was made after
    it (tf.cond makes the Switch of a value a branch captures after the branch op that reads it;
    tf.gradients of a while loop adds ops to the forward loop after the backward one reads them)."""
    place = {op.name: i for i, op in enumerate(ops)}
    forward = {op.name: [s for s in sources.get(op.name, ()) if s.name in place and not _back_edge(s, op)]
               for op in ops}
    if all(place[s.name] < place[op.name] for op in ops for s in forward[op.name]):
        return ops  # creation order already is one (the usual graph)
    waiting = {op.name: len(forward[op.name]) for op in ops}
    following: Dict[str, List[Any]] = {}
    for op in ops:
        for source in forward[op.name]:
            following.setdefault(source.name, []).append(op)
    queue = [(place[op.name], op.name, op) for op in ops if not waiting[op.name]]
    heapq.heapify(queue)
    out = []
    while queue:
        _, _, op = heapq.heappop(queue)
        out.append(op)
        for consumer in following.get(op.name, ()):
            waiting[consumer.name] -= 1
            if not waiting[consumer.name]:
                heapq.heappush(queue, (place[consumer.name], consumer.name, consumer))
    return out if len(out) == len(ops) else ops  # a cycle no back edge makes: creation order


def fetched_variables(fetched: Dict[str, Any], updates: Dict[str, List[Any]]) -> List[Dict[str, str]]:
    """{"tensor", "variable", "read", "update"} for each variable fetched itself ("fetch/..." ->
    its tensor: a hook's fetch of the global step or of a weight, which hands back its buffer) that
    the same run changes (`updates`: variable name -> the ops that change it): nothing orders a
    fetch against an update, so the value returned is the scheduler's pick."""
    out = []
    for key, tensor in fetched.items():
        op = tensor.op
        while op.type == "Identity" and op.inputs:  # a snapshot of it, forwarding its buffer
            op = op.inputs[0].op
        changers = updates.get(op.name + ":0") if op.type in ("VariableV2", "Variable") else None
        if changers:
            out.append({"tensor": key, "variable": op.name + ":0", "read": tensor.op.name, "update": changers[0].name})
    return out


def _reads(source_op: Any, names: Set[str], changing: Set[str]) -> List[Any]:
    """The ops of a run that take a variable's value (`source_op`, its variable op, if the run holds
    it): a ref variable's readers past its Identity ops (which forward its buffer), a resource
    variable's ReadVariableOp and gathers."""
    if source_op is None:
        return []
    direct = [c for t in source_op.outputs for c in t.consumers()
              if c.name in names and c.name not in changing and c.type not in ASSIGN_OPS]
    if source_op.type in ("VariableV2", "Variable"):
        direct = past_identities(direct, names)
    return [op for op in direct if op.name not in changing and op.type not in ASSIGN_OPS]


def pure(tensor: Any, names: Set[str], fed: FrozenSet[str]) -> bool:
    """Would fetching `tensor` along with a run add only stateless ops to it (a declared loss the
    run does not compute, but may without changing anything)?"""
    extra = [op for op in executed_ops([tensor.op], fed) if op.name not in names]
    return all(not op.op_def.is_stateful or op.type in READS for op in extra)


# Stateful only because their value depends on when they run: reading a variable changes nothing.
READS = frozenset(["ReadVariableOp", "VarHandleOp", "VariableV2", "Variable", "ResourceGather"])


# Ops whose output is their input's buffer (a view, not a copy): who reads a ref variable through
# them reads it when they do, not when the forwarding op ran.
FORWARDING = frozenset(["Identity", "RefIdentity", "Reshape", "Squeeze", "ExpandDims", "Enter", "RefEnter",
                        "Switch", "RefSwitch", "Bitcast"])


def _forwards(op: Any) -> bool:
    """Whether `op` hands on its input's buffer: FORWARDING, or a Transpose by the identity
    permutation (tf.tensordot's of a kernel it does not reorder)."""
    if op.type in FORWARDING:
        return True
    if op.type != "Transpose" or len(op.inputs) < 2 or op.inputs[1].op.type != "Const":
        return False
    from tensorflow.python.framework import tensor_util  # the Const's value, as TF itself reads it

    dims = [int(d) for d in np.asarray(tensor_util.MakeNdarray(op.inputs[1].op.get_attr("value"))).reshape(-1)]
    return bool(dims) and dims == list(range(len(dims)))


def past_identities(reads: List[Any], within: Set[str]) -> List[Any]:
    """The ops (among `within`) that take the value of a ref variable's reads, looking past the
    ops that forward the variable's buffer (Identity, Reshape, an identity Transpose, ...)."""
    out, stack, seen = [], list(reads), set()
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if _forwards(op):
            stack.extend(c for t in op.outputs for c in t.consumers() if c.name in within)
        else:
            out.append(op)
    return out


def constant(tf: Any, tensor: Any) -> Optional[float]:
    """A scalar tensor's value when the graph fixes it (a constant, through identities), else None."""
    for _ in range(8):
        try:
            value = tf.get_static_value(tensor)
        except Exception:
            value = None
        if value is not None:
            return float(value) if getattr(value, "size", 1) == 1 else None
        if tensor.op.type not in ("Identity", "Cast") or not tensor.op.inputs:
            return None
        tensor = tensor.op.inputs[0]
    return None


def fixed(tensor: Any, limit: int = 64) -> bool:
    """Is a scalar computed from constants alone (no placeholder, variable or stateful op upstream,
    within `limit` ops): the same value at every run, which one run of its own can read?"""
    ops = executed_ops([tensor.op], frozenset())
    return len(ops) <= limit and all(not op.op_def.is_stateful and op.type not in ("Placeholder", "PlaceholderV2",
                                                                                   "PlaceholderWithDefault")
                                     for op in ops)


def fetchable(tensor: Any, limit: int = 16) -> Optional[Any]:
    """A tensor a run can fetch holding `tensor`'s value: itself, or, inside a tf.cond branch
    (whose ops no run fetches), the value the branch's Switch took in from outside; None where
    there is none (a value computed in the branch itself)."""
    graph = tensor.graph
    for _ in range(limit):
        if graph.is_fetchable(tensor):
            return tensor
        if tensor.op.type not in ("Switch", "RefSwitch", "Identity", "RefIdentity") or not tensor.op.inputs:
            return None
        tensor = tensor.op.inputs[0]
    return None


def branch_value(tf: Any, tensor: Any) -> Optional[Any]:
    """A fetchable tensor holding the value `tensor` takes in the tf.cond branch that computes it
    (TF1 control flow: a dropout's draw under a training flag, a loss-scale optimizer's finite-step
    branch), and an empty one where a run takes the other branch, so fetching it never fails: a
    Merge of the value with an empty slice of the other branch's pivot. None where the branch is
    nested in another cond or a loop (where a Merge would be dead too). The program's graph gains
    two ops, outside every context (a finalized graph is reopened for them)."""
    from tensorflow.python.ops import control_flow_ops  # TF1's Merge, which tf's public API lacks

    context = getattr(tensor.op, "_control_flow_context", None)
    pivot = getattr(context, "pivot", None)
    if pivot is None or getattr(context, "outer_context", None) is not None or context.branch not in (0, 1):
        return None
    switch = pivot.op.inputs[0].op if pivot.op.type == "Identity" and pivot.op.inputs else None
    if switch is None or switch.type != "Switch":
        return None
    graph = tensor.graph
    finalized = graph.finalized
    if finalized:
        graph._unsafe_unfinalize()
    saved = graph._get_control_flow_context()
    try:
        graph._set_control_flow_context(None)
        with graph.as_default(), graph.name_scope(None), graph.control_dependencies(None), \
                graph.name_scope(BRANCH_SCOPE):
            other = switch.outputs[1 - context.branch]  # live exactly when `tensor` is not computed
            empty = tf.reshape(tf.cast(other, tensor.dtype), [-1])[:0]
            return control_flow_ops.merge([tensor, empty])[0]
    finally:
        graph._set_control_flow_context(saved)
        if finalized:
            graph.finalize()


def taken(fetched: Mapping[str, Any], values: Iterable[Any]) -> List[Tuple[str, Any]]:
    """(key, value) of what a run fetched, without the values of tf.cond branches it did not take
    (branch_value's Merge gave an empty one): nothing was computed there to record."""
    return [(key, value) for (key, tensor), value in zip(fetched.items(), values)
            if not _untaken(tensor, value)]


def _untaken(tensor: Any, value: Any) -> bool:
    op = getattr(tensor, "op", None)  # None: a digest's ops (graph_digests.py), never a branch's
    return op is not None and op.type == "Merge" and op.name.startswith(BRANCH_SCOPE + "/") and \
        np.size(value) == 0 and op.inputs[0].shape.num_elements() != 0


def number(tf: Any, value: Any) -> Optional[float]:
    """A hyperparameter's value: a number as it is, a tensor's where the graph fixes it, else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return constant(tf, value) if hasattr(value, "op") else None


def unique_ops(ops: Iterable[Any]) -> List[Any]:
    out: List[Any] = []
    for op in ops:
        if all(op.name != o.name for o in out):
            out.append(op)
    return out


def unique(tensors: Iterable[Any]) -> List[Any]:
    out: List[Any] = []
    names: Set[str] = set()
    for tensor in tensors:
        if tensor.name not in names:
            names.add(tensor.name)
            out.append(tensor)
    return out
