"""What a TF1 graph tells about a run: is it a training step, and what to fetch with it.

Works from the graph alone, so it covers every way a graph was built (before or
after recording started, by tf.train optimizers, Keras or tf_slim):
- a training step is a run that updates a variable (updates.py: an `Apply*` /
  `ResourceApply*` op, or an assign op a custom optimizer computed from gradients),
  runs an op an intercepted `apply_gradients` returned, or advances the global step;
- each update says which variable it changes, with what gradient, learning rate and
  slots (updates.py);
- the loss is the tensor the run's gradients were taken of (losses.py), checked at the first
  step of its kind (selfcheck.py);
- the other tensors recorded are those the run executes anyway: taps, stateful
  random ops (the random tape), input pipelines (`IteratorGetNext`, queue
  dequeues), regularization losses. Fetching only these never makes a run compute
  anything it would not have. The random tape also holds stateless draws (tf-keras
  Dropout on TF 2.x draws statelessly), as a port may draw differently.
"""

from __future__ import annotations

import collections
import re
import threading

import numpy as np
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

from ..keys import MICRO, TERM, UNCLIPPED, make_key, sparse_owner, split_key
from ..sources import Lines
from ..store.held import HELD_KINDS, held_gaps
from ..structure import leaves
from ..taps import graph_taps
from .accumulation import ACCUMULATE, additions, read_accumulators
from .declared import Declared, find_op, find_tensor
from .found import Evaluate, GraphUpdates, update_targets
from .losses import candidates, derivatives, loss_terms, run_losses
from .notes import intercepted
from .sources import plan_sources
from .updates import ASSIGN_OPS, ASSIGNED, PUSH_OPS, TAKE_OPS, UPDATE_OP, advances, pushed_by_a_worker, \
    pushed_update, variable_name
from .draws import draw_uses
from .walk import RANDOM_OPS, branch_value, constant, executed_ops, fetchable, fetched_variables, is_random_draw, \
    unique, unique_ops, unordered_reads, unordered_state_reads

INPUT_OPS = frozenset([
    "IteratorGetNext", "IteratorGetNextSync", "MultiDeviceIteratorGetNextFromShard",
    "QueueDequeue", "QueueDequeueV2", "QueueDequeueMany", "QueueDequeueManyV2",
    "QueueDequeueUpTo", "QueueDequeueUpToV2",
    # a StagingArea's get (Dopamine's replay buffer), and values Python computed inside the run
    "Unstage", "StagePeek", "PyFunc", "PyFuncStateless", "EagerPyFunc",
])


@dataclass
class StepPlan:
    """What to fetch along with one kind of run; `training` False means: let it pass."""

    training: bool
    fetch: "collections.OrderedDict[str, Any]"  # "kind/name" -> tensor, fetched in the step's own run
    global_step: Any  # read after the step for the step's info
    regularization: List[str] = field(default_factory=list)  # keys of the regularization losses among `fetch`
    # What the run trained, for the step's info: the train ops it ran (what minimize or
    # apply_gradients returned), else the ops it fetched. A port replays alternating train
    # ops with one step function per train op.
    train_ops: List[str] = field(default_factory=list)
    # Learning rates the run reads from the step counter it also increments, unordered
    # (unordered_reads): which value a step reads is up to the scheduler.
    races: List[Dict[str, str]] = field(default_factory=list)
    # The structures its inputs came in (structure.py): name -> stored form, leaves named by input
    structures: Dict[str, Any] = field(default_factory=dict)
    # Each loss key's graph tensor and how it was found (losses.py): {"tensor", "how"}
    losses: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    # What the first step of this kind checks (selfcheck.py): loss key -> {variable name: the
    # gradient its differentiation gave}, and the tensors a loss that fails the check may be instead
    derivatives: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    # Each loss key's addends among `fetch` (losses.loss_terms, record/terms.py):
    # {"parts": [{"key", "tensor", "coefficient"}], "offset": the constant added}
    terms: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    # Variables a run that is not a training step changes (a target network's sync, a counter
    # set by hand): the next step starts from their new values
    changes: List[str] = field(default_factory=list)
    # The program's lines behind what it records (record/sources.py): key -> Lines
    sources: Dict[str, Lines] = field(default_factory=dict)
    # How many tensors of each kind a step of it records ("input", "loss", "grad", ...; store/held.py)
    held: Dict[str, int] = field(default_factory=dict)
    # A micro-batch run (not a step): it adds gradients to accumulators a later step's update reads
    micro: bool = False
    # A step's updates that read accumulators: trainable variable -> its accumulator (accumulation.py)
    accumulated: Dict[str, str] = field(default_factory=dict)
    # What session.run cannot fetch (computed in a tf.cond branch; a callable can): key -> its
    # constant value, recorded as such, or None (not recorded from session.run)
    unfetchable: Dict[str, Any] = field(default_factory=dict)
    # The step's updates (updates.Update) and the ops that change their variables and slots: what
    # re-executing them runs (rerun.py)
    updates: List[Any] = field(default_factory=list)
    targets: List[str] = field(default_factory=list)


class GraphModel:
    """Analysis of one graph, cached per kind of run (fetched ops, fed tensors)."""

    def __init__(self, graph: Any, tf: Any, declared: Declared = Declared(), loss_parts: bool = False) -> None:
        self.graph = graph
        self._tf = tf
        self.declared = declared
        self._loss_parts = loss_parts  # fetch a summed loss's parts: may change how the graph optimizer sums it
        self._lock = threading.Lock()
        self._plans: Dict[Tuple[FrozenSet[str], FrozenSet[str]], StepPlan] = {}
        self._warned: Set[str] = set()
        self.warnings: List[str] = []
        self.updates = GraphUpdates(graph, tf, declared)  # every update of its variables (found.py)

    def on_worker(self, task: int) -> bool:
        """Does the graph place ops on worker task `task` ("/job:worker/task:1",
        "/job:worker/replica:0/task:1/device:CPU:0")? A parameter-server worker's graph does."""
        pattern = re.compile(r"/job:worker(/replica:\d+)?/task:%d(?!\d)" % task)
        return any(pattern.search(op.device or "") for op in self.graph.get_operations())

    def shared(self) -> bool:
        """Are its variables on a parameter server, where other workers change them while a step of
        this one runs (so no read of them is the state a step started from)?"""
        return any("/job:ps" in (op.device or "") for op in self.graph.get_operations()
                   if op.type in ("VariableV2", "VarHandleOp"))

    # ---- variables --------------------------------------------------------------------------

    def variables(self) -> List[Tuple[str, Any]]:
        """("var/<name>" or "slot/<name>", variable) for every global variable, in creation order."""
        slots: Set[str] = set()
        for update in self.updates.all():
            slots.update(update.slots)
        for variable in intercepted(self.graph)["slot"]:
            slots.add(variable.name)
        out = []
        seen: Set[str] = set()
        for variable in self.graph.get_collection(self._tf.compat.v1.GraphKeys.GLOBAL_VARIABLES):
            if variable.name in seen:
                continue
            seen.add(variable.name)
            out.append((make_key("slot" if variable.name in slots else "var", variable.name), variable))
        return out

    def slot_roles(self) -> Dict[str, Dict[str, str]]:
        """Each slot's variable, update and argument (found.GraphUpdates.slot_roles)."""
        return self.updates.slot_roles()

    def update_facts(self, evaluate: Optional[Evaluate] = None) -> Dict[str, Dict[str, Any]]:
        """What the golden says of every update (found.GraphUpdates.facts)."""
        return self.updates.facts(evaluate)

    # ---- runs -------------------------------------------------------------------------------

    def plan(self, fetch_ops: Iterable[Any], fed: Iterable[str]) -> StepPlan:
        fetch_ops = list(fetch_ops)
        key = (frozenset(op.name for op in fetch_ops), frozenset(fed))
        with self._lock:
            plan = self._plans.get(key)
            if plan is None:
                plan = self._plans[key] = self._make_plan(fetch_ops, key[1])
        return plan

    def _make_plan(self, fetch_ops: List[Any], fed: FrozenSet[str]) -> StepPlan:
        executed = sorted(executed_ops(fetch_ops, fed), key=lambda op: op._id)  # creation order: deterministic
        names = set(op.name for op in executed)
        if any(op.type in TAKE_OPS and pushed_by_a_worker(op) for op in executed):
            # a SyncReplicasOptimizer chief applying what the workers pushed: it waits for their
            # steps, so it is not one (each worker's step reads the variables after it)
            return StepPlan(False, collections.OrderedDict(), None)
        updates = [u for u in self.updates.known() if u.op.name in names]
        updates += [u for u in (pushed_update(op) for op in executed if op.type in PUSH_OPS) if u is not None]
        if any(op.type in ASSIGN_OPS for op in executed):  # the whole graph's dataflow only for these runs
            updates += [u for u in self.updates.assigned() if u.op.name in names]
        notes = intercepted(self.graph)
        declared = self.declared
        train_ops = [op for op in notes["train_op"] if op.name in names]
        train_ops += unique_ops(op for op in (find_op(self.graph, n) for n in declared.train_ops)
                                 if op is not None and op.name in names and op not in train_ops)
        global_step = self._global_step()
        increments = global_step is not None and any(
            op.type in ASSIGN_OPS and variable_name(op.inputs[0]) == global_step.name and advances(op)
            for op in executed)
        training = bool(updates or train_ops or increments)
        fetch: collections.OrderedDict = collections.OrderedDict()
        accumulating = self.updates.accumulators()
        micro = [] if training else additions(executed, accumulating)
        if not training and not micro:
            return StepPlan(False, fetch, None, changes=self._changes(executed))
        if micro:  # a micro-batch run: recorded, for the step that applies what it adds (accumulation.py)
            updates = micro
        ordered = executed

        def add(kind: str, name: str, tensor: Any) -> None:
            fetch.setdefault(make_key(kind, name), tensor)

        for op in ordered:
            if op.type in INPUT_OPS:
                for tensor in op.outputs:
                    add("input", tensor.name, tensor)
        for op in ordered:
            if is_random_draw(op):
                for tensor in op.outputs:
                    add("random", tensor.name, tensor)
        for name, tensor in graph_taps(self.graph):
            if tensor.op.name in names:
                add("tap", name, tensor)
            else:
                self._warn("tap %r (%s) is not computed by the training step, so it is not recorded: "
                           "recording it would run ops the step does not run" % (name, tensor.name))
        # The run's loss is what its gradients were taken of (losses.py); each checked at the
        # first step of its kind (selfcheck.py).
        found = run_losses(self.graph, declared, notes, updates, ordered, fed)
        losses: Dict[str, Dict[str, Any]] = {}
        derived: Dict[str, Dict[str, Any]] = {}
        terms: Dict[str, Dict[str, Any]] = {}
        updated = [u.var for u in updates if u.var is not None]
        for tensor, how in found:
            key = make_key("loss", "loss" if len(found) == 1 else tensor.name)
            add("loss", split_key(key)[1], tensor)
            losses[key] = {"tensor": tensor.name, "how": how}
            derived[key] = derivatives(notes, tensor, updated, names)
            parts, offset = loss_terms(tensor, lambda t: constant(self._tf, t)) if self._loss_parts else ([], 0.0)
            for index, (part, coefficient) in enumerate(parts):
                part_key = make_key("loss", "%s%s%d" % (split_key(key)[1], TERM, index))
                add("loss", split_key(part_key)[1], part)
                terms.setdefault(key, {"parts": [], "offset": offset})["parts"].append(
                    {"key": part_key, "tensor": part.name, "coefficient": coefficient})
        regularization = []
        for tensor in self.graph.get_collection(self._tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES):
            if tensor.op.name in names:
                add("loss", tensor.name, tensor)
                regularization.append(make_key("loss", tensor.name))
        stated = [t for t in (find_tensor(self.graph, n) for n in declared.learning_rates) if t is not None]
        rates = unique([t for t in stated if t.op.name in names] or [u.lr for u in updates if u.lr is not None])
        for tensor in rates:
            add("lr", "learning_rate" if len(rates) == 1 else tensor.name, tensor)
        unclipped = {after.name: before for before, after in notes["clipped"]}
        for update in updates:
            if update.kind == ASSIGNED and update.grad is None:
                seen = any(notes[kind] for kind in ("gradient", "sparse", "derivative"))
                self._warn("the gradient of %s, which the run updates by an assign op, was not found, so it is "
                           "not recorded: %s, or declare it: tracekit record --gradient %s=TENSOR" % (
                               update.var, "no gradient the program took (tf.gradients, compute_gradients) is the "
                               "one its update reads" if seen else "build the graph inside the recorder (tracekit "
                               "record does), where tf.gradients and compute_gradients are seen", update.var))
            if update.var is None or update.grad is None:
                continue
            if update.kind == ACCUMULATE:
                add("grad", update.var + MICRO, update.grad)
            elif update.indices is None:
                add("grad", update.var, update.grad)
                before = update.unclipped if update.unclipped is not None else unclipped.get(update.grad.name)
                if before is not None:  # what tf.clip_by_global_norm was given, beside what it made
                    add("grad", update.var + UNCLIPPED, before)
            else:
                add("grad", update.var + "/values", update.grad)
                add("grad", update.var + "/indices", update.indices)
        unfetchable = self._fetchable(fetch)
        trained = sorted(op.name for op in train_ops) or sorted(op.name for op in fetch_ops)
        races = []
        if increments:
            keys = {tensor.name: key for key, tensor in fetch.items() if key.startswith("lr/")}
            for race in unordered_reads(rates, global_step, executed, fed):
                race["lr"] = keys.get(race["lr"], race["lr"])
                races.append(race)
                self._warn("a race in the training step: the learning rate %(lr)s reads %(counter)s (op %(read)s) "
                           "with no ordering against its increment (op %(increment)s) in the same run, so a step "
                           "may read the counter before or after it moves and the recorded rate may be the next "
                           "step's. Where it can, the recorder keeps which value the rate read at each step (a warning "
                           "says where it cannot), and a replay feeds it to the port's schedule; a trace a port "
                           "reproduces by itself needs the increment ordered after the update "
                           "(apply_gradients(..., global_step=...))" % race)
        changed: Dict[str, List[Any]] = {}  # variable -> the ops of the run that change it
        for update in updates:
            # an addition to an accumulator changes the accumulator, not the variable it sums for
            moved = [variable_name(update.op.inputs[0])] if update.kind == ACCUMULATE else [update.var]
            for var in moved + list(update.roles):
                if var is not None and (global_step is None or var != global_step.name):
                    changed.setdefault(var, []).append(update.op)
        for op in executed:  # decoupled weight decay's assign_sub beside ApplyAdam, say
            if op.type in ASSIGN_OPS or op.type.startswith(("Scatter", "ResourceScatter")):
                var = variable_name(op.inputs[0]) if op.inputs else None
                if var is not None and var in changed and all(op.name != o.name for o in changed[var]):
                    changed[var].append(op)
        read = {key: tensor for key, tensor in fetch.items() if split_key(key)[0] in ("loss", "tap", "lr", "grad")}
        read.update((make_key("fetch", op.outputs[0].name), op.outputs[0]) for op in fetch_ops if op.outputs)
        # what the run executes with the recorder's fetches added (a loss the step does not need)
        extended = executed_ops(list(fetch_ops) + [t.op for t in read.values()], fed)
        # what the run's callers fetch (hooks too: a MonitoredSession runs their fetches with the step)
        # also reads the step counter its increment changes
        counter = {global_step.name: [op for op in executed if op.type in ASSIGN_OPS and advances(op)
                                      and variable_name(op.inputs[0]) == global_step.name]} if increments else {}
        fetched = collections.OrderedDict((key, t) for key, t in read.items() if split_key(key)[0] == "fetch")
        raced = unordered_state_reads(read, changed, extended, fed, fetch_ops)
        raced += unordered_state_reads(fetched, counter, extended, fed, fetch_ops) if counter else []
        raced += fetched_variables(fetched, dict(changed, **counter))
        for race in [r for i, r in enumerate(raced) if all(r["tensor"] != o["tensor"] for o in raced[:i])]:
            races.append(race)
            self._warn("a race in the training step: %(tensor)s reads %(variable)s (op %(read)s) with no ordering "
                       "against its update (op %(update)s) in the same run, so its value may be taken before or "
                       "after the update; a replay compares it with the value from before the update. Order "
                       "the read before the update (a control dependency, or gate_gradients) and record again"
                       % race)
        inputs = {key[len("input/"):] for key in fetch if key.startswith("input/")}
        structures = {name: stored for name, stored in notes["structure"]
                      if leaves(stored) and set(leaves(stored)) <= inputs}
        held = self.variables()
        moved = {var: list(ops) for var, ops in changed.items()}  # and what else the run assigns (a moving average)
        for op in executed:
            if op.type in ASSIGN_OPS or op.type.startswith(("Scatter", "ResourceScatter")):
                var = variable_name(op.inputs[0]) if op.inputs else None
                if var is not None and all(op.name != o.name for o in moved.get(var, [])):
                    moved.setdefault(var, []).append(op)
        sources = plan_sources(fetch, moved, {v.name: v for _, v in held}, [k[5:] for k, _ in held
                                                                        if k.startswith("slot/")], executed)
        counts = collections.Counter(split_key(key)[0] for key in fetch if key not in regularization)
        counts["input"] = len(inputs | set(fed))
        counts["grad"] = len({sparse_owner(split_key(k)[1]) or split_key(k)[1] for k in fetch
                              if k.startswith("grad/") and UNCLIPPED not in k})
        if micro:
            return StepPlan(False, fetch, None, regularization, trained, races, structures, losses, derived,
                            terms=terms, sources=sources, changes=self._changes(executed), micro=True,
                            unfetchable=unfetchable)
        accumulated = read_accumulators(updates, accumulating, unclipped)
        if not accumulated:  # a step whose inputs and loss are its micro-batch runs' is not without them
            for message in held_gaps("+".join(trained), counts):
                self._warn(message)
        return StepPlan(True, fetch, global_step, regularization, trained, races, structures, losses, derived,
                        terms=terms, sources=sources, held={k: counts.get(k, 0) for k in HELD_KINDS},
                        accumulated=accumulated, unfetchable=unfetchable, updates=list(updates),
                        targets=update_targets(updates, executed))

    def _fetchable(self, fetch: "collections.OrderedDict[str, Any]") -> Dict[str, Any]:
        """What a step records inside a tf.cond branch (a loss-scale optimizer's updates run only
        where the gradients are finite, tflearn's and TF1 Keras' dropout in training only), which
        session.run refuses to fetch (a callable fetches it): a value the branch takes in is
        fetched where it enters, a constant recorded as the value it is, one computed in the branch
        fetched through a Merge that is empty where the branch is not taken (walk.branch_value);
        what is left is returned (key -> its constant value, or None)."""
        unfetchable = {}
        for key, tensor in list(fetch.items()):
            found = fetchable(tensor)
            if found is not None:
                fetch[key] = found
                continue
            value = constant(self._tf, tensor)
            if value is None:
                found = branch_value(self._tf, tensor)
                if found is not None:
                    fetch[key] = found
                    continue
            unfetchable[key] = None if value is None else np.asarray(value, tensor.dtype.as_numpy_dtype)
        return unfetchable

    def _changes(self, executed: List[Any]) -> List[str]:
        """The global variables a run changes (assign, scatter and update ops on them)."""
        known = {v.name for v in self.graph.get_collection(self._tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)}
        changed = []
        for op in executed:
            if op.type in ASSIGN_OPS or UPDATE_OP.match(op.type) or op.type.startswith(("Scatter", "ResourceScatter")):
                name = variable_name(op.inputs[0]) if op.inputs else None
                if name in known and name not in changed:
                    changed.append(name)
        return changed

    def loss_candidates(self, loss: Any) -> List[Any]:
        """What a loss that fails the self-check may be instead (losses.candidates)."""
        return candidates(loss, intercepted(self.graph))

    def _global_step(self) -> Any:
        try:
            return self._tf.compat.v1.train.get_global_step(self.graph)
        except Exception:
            return None

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            self.warnings.append(message)

    # ---- seeds ------------------------------------------------------------------------------

    def seeds(self) -> Dict[str, Any]:
        """The graph seed and (seed, seed2) of every stateful random op in the graph."""
        ops: collections.OrderedDict = collections.OrderedDict()
        for op in self.graph.get_operations():
            if op.type in RANDOM_OPS and op.op_def.is_stateful:
                try:
                    ops[op.name] = [int(op.get_attr("seed")), int(op.get_attr("seed2"))]
                except ValueError:
                    ops[op.name] = None
        return {"graph_seed": self.graph.seed, "ops": ops}

    def draw_uses(self) -> Dict[str, Dict[str, Any]]:
        """What the program does with each random draw, where the graph says (draws.py)."""
        return draw_uses(self._tf, [t for op in self.graph.get_operations() if is_random_draw(op) for t in op.outputs])
