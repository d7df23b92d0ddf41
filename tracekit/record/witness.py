"""What the recorder verifies of the steps it records, as it records them.

- At the first step of each kind of run, the self-check (selfcheck.py): each loss's gradients
  recomputed, from the state the step started from, against the step's own; a loss that fails is
  replaced by the candidate whose gradients match, or ends the recording.
- At every step whose starting state is known (the state is read after every full step), the
  recorded tensors that read a variable unordered with its update in the same run (a race,
  walk.unordered_state_reads) are recomputed from that state, so the golden holds the value the
  step's gradients came from, not one the scheduler picked.
- At the first AUDIT_STEPS full steps, the update audit (store/audit.py): each variable's update
  recomputed in float64 from the state before, the recorded gradient and learning rate, where its
  kernel has a rule; and every update re-executed from them (rerun.py), which also verifies, once
  per variable, what is claimed of it: its gradient, its learning rate and its slots' roles.
The recorder hands each step's values through `after_run` and writes `meta()`. Python 3.7 syntax.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

import numpy as np

from .._heap import give_back
from ..errors import RecordError
from ..keys import (ASSIGNED, AUDIT, LOSSES, RACE_EFFECTS, REEXECUTED, SELF_CHECK, SPARSE_INDICES, SPARSE_VALUES,
                    UNCLIPPED, make_key, sparse_owner, split_key)
from ..store.audit import AuditResult, audit_step, with_reexecution
from . import selfcheck
from .claims import Ledger, verify
from .graph import GraphModel, StepPlan
from .rerun import Rerun
from .updates import variables_read

RECOMPUTED_KINDS = ("loss", "tap")  # racy reads the recorder recomputes (a fetched structure it only reports)
MEASURED_KINDS = RECOMPUTED_KINDS + ("grad",)  # and racy gradients, recomputed to measure the race, kept as read
AUDIT_STEPS = 3  # steps the recorder audits (tracekit verify --audit audits every whole step later)


class Witness:
    def __init__(self, tf: Any, path: str) -> None:
        self._tf = tf
        self._path = path
        self._checked: set = set()  # the kinds of steps checked ("+".join(train ops))
        self._checks: List[Dict[str, Any]] = []  # their results
        self._losses: Dict[str, Any] = {}  # kind of step -> each loss key's graph tensor and how it was found
        self._state: Optional[Dict[str, Any]] = None  # the state the next step starts from, when known
        self._before: Optional[Dict[str, Any]] = None  # the state the step being recorded started from
        self._shared_graph: Optional[bool] = None  # its variables are on parameter servers (GraphModel.shared)
        self._copy: Any = None  # a GraphCopy kept for recomputing racy reads (or why none can be made)
        self._recomputed: Dict[str, int] = {}  # racy keys -> steps whose value was recomputed
        self._reads: Dict[Tuple[str, ...], Set[str]] = {}  # racy tensors -> the variables they are computed from
        # racy gradients -> (how far the race moved them at most, relative to their size; that step)
        self._race_effects: Dict[str, Tuple[float, int]] = {}
        self._keys: Dict[str, str] = {}  # variable name -> its key ("var/..." or "slot/...")
        self._facts: Dict[str, Any] = {}  # the golden's "updates" and "slots" metadata, for the audit
        self._audits: List[Any] = []  # StepAudit of the steps audited
        self._reruns: List[Any] = []  # StepAudit of their updates re-executed (rerun.py)
        self._fed: Dict[str, Any] = {}  # what the step being recorded was fed and drew (graph tensor name -> value)
        self._ledger = Ledger({"updates": {}, "slots": {}})  # what re-executing the updates verified (claims.py)
        self.failure: Optional[RecordError] = None  # a failed self-check: the recording ends with it
        # kinds of steps whose check waits for a step with finite gradients -> (the steps passed, the losses)
        self._deferred: Dict[str, Tuple[List[int], Dict[str, str]]] = {}

    # ---- the state steps start from ----------------------------------------------------------------

    def begin(self, keys: Mapping[str, str], updates: Mapping[str, Any], slots: Mapping[str, Any]) -> None:
        """The recorded variables (name -> key) and what the audit reads of the graph's updates."""
        self._keys = dict(keys)
        self._facts = {"updates": dict(updates), "slots": dict(slots)}
        self._ledger = Ledger(self._facts)

    def state(self, values: Optional[Mapping[str, Any]]) -> None:
        """After the initial read or a step: the variables' values as read (variable name -> value;
        None: not read, a light step)."""
        self._state = None if values is None else dict(values)

    def _starting(self, changed: List[Tuple[str, Any]]) -> Optional[Dict[str, Any]]:
        if self._state is None:
            return None
        state = dict(self._state)
        state.update((split_key(key)[1].rsplit("@", 1)[0], value) for key, value in changed)
        return state

    # ---- the step ---------------------------------------------------------------------------------

    def probes(self, plan: StepPlan, read_state: Callable[[], Dict[str, Any]]) -> Optional[List[Tuple[str, str, Any]]]:
        """At the first step of each kind: what to fetch with it for the check ((loss key, variable,
        its gradient)); None when no check is due. Reads the state if it is not known."""
        kind = _kind(plan)
        if kind in self._checked or not plan.losses:
            return None
        self._checked.add(kind)
        if self._state is None:
            self._state = read_state()
        return [(key, var, grad) for key, grads in plan.derivatives.items() for var, grad in grads.items()]

    def after_run(self, model: GraphModel, plan: StepPlan, step: int, feeds: List[Tuple[str, Any]],
                  values: List[Tuple[str, Any]], changed: List[Tuple[str, Any]],
                  probes: Optional[List[Tuple[str, str, Any]]], probed: List[Any]) -> List[Tuple[str, Any]]:
        """The step's values as recorded: checked (when `probes` were fetched), racy reads recomputed.
        Raises RecordError when a loss fails its check."""
        state = self._before = None if self._shared(model) else self._starting(changed)
        fed = dict((name, value) for name, value in feeds if name)
        fed.update((split_key(key)[1], value) for key, value in values if split_key(key)[0] in ("input", "random"))
        self._fed = fed
        if probes is not None and state is None:
            why = ("its variables live on parameter servers, where other workers change them while this step runs: "
                   "no state read is the one it started from" if self._shared(model) else
                   "the state it started from was not read")
            self._checks.extend(dict(selfcheck.LossCheck(key, found["tensor"], selfcheck.UNVERIFIED, step,
                                                         why).to_meta(), train_ops=_kind(plan))
                                for key, found in plan.losses.items())
            self.note_losses(plan)
        elif probes is not None and not _finite_gradients(values):
            # an overflow a loss-scale optimizer skips: nothing to check the loss's gradients against
            kind = _kind(plan)
            self._checked.discard(kind)
            passed = self._deferred.get(kind, ([], {}))[0] + [step]
            self._deferred[kind] = (passed, {key: found["tensor"] for key, found in plan.losses.items()})
        elif probes is not None:
            self._deferred.pop(_kind(plan), None)
            values = self._check(model, plan, step, state, fed, values, probes, probed)
        racy = _measured_races(plan)
        if racy and state is not None:
            values = self._recompute(model, plan, racy, state, fed, values, step)
        elif probes is not None and len(self._reruns) >= AUDIT_STEPS:
            self.close()  # a second copy of the model's variables: kept only while racy reads or the audit need it
        return values

    def needs_values(self, plan: StepPlan) -> bool:
        """Whether the coming step of `plan` must be recorded from values, its state read whole
        after it: while the audit runs, a check is due or deferred, or racy reads are recomputed
        (else its digests can be made in the graph: graph_digests.py)."""
        kind = _kind(plan)
        return len(self._audits) < AUDIT_STEPS or bool(_measured_races(plan)) or kind in self._deferred or \
            bool(plan.losses and kind not in self._checked)

    def _shared(self, model: GraphModel) -> bool:
        if self._shared_graph is None:
            self._shared_graph = model.shared()
        return self._shared_graph

    def _check(self, model: GraphModel, plan: StepPlan, step: int, state: Dict[str, Any], fed: Dict[str, Any],
               values: List[Tuple[str, Any]], probes: List[Tuple[str, str, Any]],
               probed: List[Any]) -> List[Tuple[str, Any]]:
        exact: Dict[str, Dict[str, Any]] = {key: {} for key in plan.losses}
        for (key, var, _), value in zip(probes, probed):
            exact[key][var] = selfcheck.dense(value, np.shape(state.get(var)))
        gradients = {key: exact[key] or recorded_gradients(values, state) for key in plan.losses}
        # a gradient computed from a read the step's own updates may overtake (a race) is no evidence
        racy = {_variable_of(r["tensor"]) for r in plan.races if split_key(r.get("tensor", "fetch/-"))[0] == "grad"}
        gradients = {key: {var: g for var, g in grads.items() if var not in racy} for key, grads in gradients.items()}
        snapshot = selfcheck.StepSnapshot(step, state, fed, gradients, exact=all(bool(g) for g in exact.values()),
                                          racy=sorted(racy))
        losses = {key: plan.fetch[key] for key in plan.losses}
        candidates = {key: model.loss_candidates(tensor) for key, tensor in losses.items()}
        copy = self._graph_copy(model.graph)
        if isinstance(copy, str):
            results = [selfcheck.LossCheck(key, t.name, selfcheck.UNVERIFIED, step, copy) for key, t in losses.items()]
        else:
            results = selfcheck.check_losses(copy, losses, candidates, snapshot)
            results = self._differentiated_by_the_program(model, losses, candidates, snapshot, results)
        out = list(values)
        for result in results:
            if result.verdict == selfcheck.REPLACED:
                plan.fetch[result.key] = model.graph.get_tensor_by_name(result.tensor)
                plan.losses[result.key] = {"tensor": result.tensor, "how": "found by the self-check"}
                out = [(key, np.asarray(result.value, np.asarray(value).dtype) if key == result.key else value)
                       for key, value in out]
                model._warn("the loss first taken, %s, is not what the step differentiated; %s is, and is recorded "
                            "(the self-check)" % (result.original, result.tensor))
        self._checks.extend(dict(r.to_meta(), train_ops=_kind(plan)) for r in results)
        self.note_losses(plan)
        failed = [r for r in results if r.verdict == selfcheck.FAILED]
        if failed:
            self.failure = RecordError(self._failed(failed, len(next(iter(gradients.values()), {}))))
        return out

    def _failed(self, failed: List[selfcheck.LossCheck], compared: int) -> str:
        """What a failed check says: the variables whose gradients disagree; where those are
        exactly the variables whose updates the recorder did not understand (hand-written assigns,
        as it read them) while the others agree, their reading is in question, not the loss."""
        updates = self._facts.get("updates") or {}
        unread = lambda var: not isinstance(updates.get(var), Mapping) or updates[var].get("update") == ASSIGNED
        said = "; ".join("%s (%s): %s" % (r.key, r.tensor, r.detail) for r in failed)
        failing = sorted({var for r in failed for var in r.failing})
        if failing and all(unread(v) for v in failing) and len(failing) < compared:
            return ("%s: the gradients of %s disagree with the differentiation of the loss, while the %d other "
                    "variables' agree (%s). The recorder did not understand the update of %s: it read it as "
                    "hand-written assign ops, so the gradient it holds and the races it looks for there may be "
                    "wrong; the loss is not in question. Declare the gradient the update reads (tracekit record "
                    "--gradient VAR=TENSOR) where you know it; tracekit show %s lists the check" % (
                        self._path, ", ".join(failing), compared - len(failing), said, ", ".join(failing),
                        self._path))
        return ("%s: %s%s. The golden would hold a loss that is not the one trained: name it with --loss TENSOR "
                "(tracekit.tf1.record(loss=...)); tracekit show %s lists the check" % (
                    self._path, said, " (the gradients off: %s)" % ", ".join(failing) if failing else "", self._path))

    def _differentiated_by_the_program(self, model: GraphModel, losses: Mapping[str, Any],
                                       candidates: Mapping[str, Any], snapshot: selfcheck.StepSnapshot,
                                       results: List[selfcheck.LossCheck]) -> List[selfcheck.LossCheck]:
        """The checks a copy could not differentiate for (a custom gradient, such as
        tf.contrib.layers.recompute_grad's, that rebuilds its layers in the graph it runs in), made
        again with the gradients built in the program's graph and evaluated in a new copy."""
        stuck = {r.key for r in results if r.verdict == selfcheck.UNVERIFIED and r.detail.startswith(
            "its gradients could not be recomputed")}
        if not stuck:
            return results
        prebuilt = selfcheck.prebuild(model.graph, {k: losses[k] for k in stuck},
                                      {k: list(snapshot.gradients.get(k) or ()) for k in stuck})
        if not prebuilt:
            return results
        self.close()
        copy = self._copy = selfcheck.GraphCopy.of(self._tf, model.graph, prebuilt)
        if isinstance(copy, str):
            return results
        again = {r.key: r for r in selfcheck.check_losses(copy, {k: losses[k] for k in stuck}, candidates, snapshot)}
        return [again.get(r.key, r) for r in results]

    def _recompute(self, model: GraphModel, plan: StepPlan, racy: List[str], state: Dict[str, Any],
                   fed: Dict[str, Any], values: List[Tuple[str, Any]], step: int) -> List[Tuple[str, Any]]:
        """The racy reads' values from the state the step started from (the one its gradients saw);
        a racy gradient is kept as the update read it, and how far the race moved it is noted."""
        copy = self._graph_copy(model.graph)
        recorded = dict(values)
        wanted = [(key, plan.fetch[key]) for key in racy if key in plan.fetch and key in recorded]
        if isinstance(copy, str) or not wanted:
            return values
        names = tuple(t.name for _, t in wanted)
        if names not in self._reads:  # a rate read racily reads the step counter, not the model
            self._reads[names] = variables_read([t for _, t in wanted])
        try:
            copy.load({name: value for name, value in state.items() if name in self._reads[names]}, fed)
            got = dict(zip([key for key, _ in wanted], copy.evaluate(list(names))))
        except Exception:  # the race stays reported, the value as fetched
            return values
        for key in [k for k in got if split_key(k)[0] == "grad"]:  # what the update read, kept: its race measured
            effect = race_effect(recorded[key], got.pop(key))
            if effect is not None and effect > self._race_effects.get(key, (-1.0, 0))[0]:
                self._race_effects[key] = (effect, step)
        for key in got:
            self._recomputed[key] = self._recomputed.get(key, 0) + 1
        return [(key, np.asarray(got[key], np.asarray(value).dtype) if key in got else value) for key, value in values]

    def _graph_copy(self, graph: Any) -> Any:
        # made again when the graph has grown since (an op a later kind of step runs)
        if self._copy is None or (not isinstance(self._copy, str) and self._copy.version != graph.version):
            if self._copy is not None and not isinstance(self._copy, str):
                self._copy.close()
            self._copy = selfcheck.GraphCopy.of(self._tf, graph)
        return self._copy

    def audit(self, model: GraphModel, plan: StepPlan, step: int, values: List[Tuple[str, Any]],
              after: Optional[Mapping[str, Any]]) -> List[Tuple[str, Any]]:
        """The update audit of a step just run (before `state` takes its `after`): its variables
        recomputed from the state before it by their kernels' rules (store/audit.py) and their
        updates re-executed (rerun.py). The step's values are returned without the learning rates
        re-execution showed are none (and later steps do not fetch them: `refuted`)."""
        if after is None or self._before is None or len(self._audits) >= AUDIT_STEPS:
            return values
        keyed = lambda state: {self._keys[name]: value for name, value in state.items() if name in self._keys}
        self._audits.append(audit_step(self._facts["updates"], self._facts["slots"], keyed(self._before),
                                       keyed(after), dict(values), plan.races, step=step))
        copy = self._graph_copy(model.graph)
        if isinstance(copy, str):
            return values
        rerun = Rerun(copy, plan, self._before, self._fed, values, self._keys)
        audited, base = rerun.audit(step, after)
        self._reruns.append(audited)
        fresh = [u.var for u in rerun.updates if u.var not in self._ledger.claims]
        added = self._ledger.note(verify(rerun, base, fresh), plan, model.graph) if base is not None and fresh else []
        if len(self._reruns) >= AUDIT_STEPS and not _measured_races(plan):
            self.close()  # a racy learning rate's counter read needs no copy: the step keeps which value it read
        return [(key, value) for key, value in values if key not in self._ledger.refuted] + added

    @property
    def refuted(self) -> set:
        """Learning-rate keys ("lr/..") re-execution showed are none: not fetched."""
        return self._ledger.refuted

    def rates(self, plan: StepPlan) -> Dict[str, Any]:
        """The rates re-execution found that a step of `plan` reads (key -> tensor): fetched with it."""
        return self._ledger.rates(plan)

    # ---- what the golden says of it ----------------------------------------------------------------

    def note_losses(self, plan: StepPlan) -> None:
        """Each loss of a kind of step (steps of alternating train ops each have their own)."""
        if plan.losses:
            self._losses[_kind(plan)] = {key: dict(found) for key, found in plan.losses.items()}

    def meta(self) -> Dict[str, Any]:
        waiting = [dict(selfcheck.LossCheck(key, tensor, selfcheck.UNVERIFIED, steps[0],
                                            "the gradients of every step of its kind (%d) are not finite (a loss-scale "
                                            "optimizer's overflow): none to check the loss's against" % len(steps)
                                            ).to_meta(), train_ops=kind)
                   for kind, (steps, losses) in self._deferred.items() for key, tensor in losses.items()]
        out: Dict[str, Any] = {LOSSES: dict(self._losses), SELF_CHECK: list(self._checks) + waiting}
        if self._recomputed:
            out["recomputed"] = dict(self._recomputed)
        if self._race_effects:
            out[RACE_EFFECTS] = {key: {"effect": e, "step": k} for key, (e, k) in sorted(self._race_effects.items())}
        if self._audits:
            rerun = AuditResult.of_steps(self._reruns) if self._reruns else None
            out[AUDIT] = with_reexecution(AuditResult.of_steps(self._audits), rerun).to_meta()
            if rerun is not None:
                out[REEXECUTED] = rerun.to_meta()
        if self._ledger.claims:  # what re-execution verified of the updates: their facts and slots' roles
            out["updates"], out["slots"] = self._facts["updates"], self._facts["slots"]
        return out

    def close(self) -> None:
        copy, self._copy = self._copy, None
        if copy is not None and not isinstance(copy, str):
            copy.close()
            del copy  # its graph too, before the heap is given back
            give_back()  # the copy's state and the audit's held it several times over: not kept resident


def _finite_gradients(values: List[Tuple[str, Any]]) -> bool:
    """Whether every gradient a step recorded is finite."""
    return all(np.all(np.isfinite(np.asarray(value, np.float64))) for key, value in values
               if split_key(key)[0] == "grad" and np.asarray(value).dtype.kind == "f")


def race_effect(recorded: Any, clean: Any) -> Optional[float]:
    """How far a race moved a value: max |recorded - recomputed| over max |recomputed| (None where
    the two cannot be compared element by element)."""
    a, b = np.asarray(recorded, np.float64), np.asarray(clean, np.float64)
    if a.shape != b.shape or not a.size:
        return None
    scale = float(np.max(np.abs(b)))
    diff = float(np.max(np.abs(a - b)))
    return diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))


def flat_probes(probes: List[Tuple[str, str, Any]]) -> List[Any]:
    """The tensors a callable fetches for `probes` (an IndexedSlices as its rows, ids and shape)."""
    out: List[Any] = []
    for _, _, grad in probes:
        if hasattr(grad, "indices"):
            out.extend([grad.values, grad.indices] + ([grad.dense_shape] if grad.dense_shape is not None else []))
        else:
            out.append(grad)
    return out


def unflat_probes(probes: List[Tuple[str, str, Any]], values: List[Any]) -> List[Any]:
    """The probes' values from what flat_probes fetched."""
    out, at = [], 0
    for _, _, grad in probes:
        if hasattr(grad, "indices"):
            size = 2 if grad.dense_shape is None else 3
            out.append(selfcheck.Rows(*values[at:at + size]))
            at += size
        else:
            out.append(values[at])
            at += 1
    return out


def recorded_gradients(values: List[Tuple[str, Any]], state: Mapping[str, Any]) -> Dict[str, Any]:
    """Each variable's gradient as the step recorded it, before clipping where that is known
    (dense; an optimizer's sparse update's rows summed into the variable's shape)."""
    recorded = dict(values)
    out: Dict[str, Any] = {}
    for key, value in values:
        kind, name = split_key(key)
        if kind != "grad" or name.endswith(UNCLIPPED):
            continue
        var = sparse_owner(name)
        if var is None:
            out[name] = np.asarray(recorded.get(key + UNCLIPPED, value), np.float64)
        elif name.endswith(SPARSE_VALUES) and make_key("grad", var + SPARSE_INDICES) in recorded:
            rows = selfcheck.Rows(value, recorded[make_key("grad", var + SPARSE_INDICES)])
            out[var] = selfcheck.dense(rows, np.shape(state.get(var)))
    return out


def _measured_races(plan: StepPlan) -> List[str]:
    """The keys of the racy reads of `plan` that the copy recomputes or measures (a loss, a tap, a
    gradient read unordered with an update); a learning rate's racy read of the step counter is
    kept as read with the step (counter_reads.py) and needs no copy."""
    return [r["tensor"] for r in plan.races if "tensor" in r and split_key(r["tensor"])[0] in MEASURED_KINDS]


def _kind(plan: StepPlan) -> str:
    """A kind of step, as the golden's train_ops list names it."""
    return "+".join(plan.train_ops)


def _variable_of(key: str) -> str:
    """The variable a "grad/..." key is the gradient of."""
    name = split_key(key)[1].split(UNCLIPPED)[0]
    return sparse_owner(name) or name
