"""The update audit by re-execution: each update a step ran, run again from what the step recorded.

At the steps the recorder audits, the ops that change the step's variables and slots (an
optimizer's update op, a hand-written optimizer's assign ops, alike) run again in the graph's
copy (selfcheck.GraphCopy), loaded with the state the step started from and fed what the step
was fed and drew, with the gradients and learning rates it recorded; the variables and slots
they leave are held to those the step recorded. No rule table is needed: every update is
auditable, and where a kernel rule exists (store/update_rules.py) the two checks must agree.

Once per variable, claims.py re-runs it with what is claimed of the update changed.
Python 3.7 syntax.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..keys import MICRO, UNCLIPPED, split_key
from ..store.audit_result import AGREES, DISAGREES, NOT_AUDITABLE, RERUN, RERUN_ULPS, StepAudit, VariableAudit
from .roundoff import compare
from .updates import DENSE_CONVERSIONS


class Rerun:
    """A step's updates, run again in a copy of its graph (see the module's doc)."""

    def __init__(self, copy: Any, plan: Any, before: Mapping[str, Any], fed: Mapping[str, Any],
                 values: Sequence[Tuple[str, Any]], keys: Mapping[str, str]) -> None:
        self.copy = copy
        counter = getattr(plan.global_step, "name", None)
        self.counter = counter if counter in before else None  # the step counter, where the state holds it
        self._keys = keys  # variable name -> its key ("var/..", "slot/..")
        self._plan = plan
        self.before = before
        self.feeds: Dict[str, Any] = dict(fed)
        self.grads: Dict[str, str] = {}  # variable -> the tensor its recorded gradient is fed at (dense, or rows)
        for key, value in values:
            kind, name = split_key(key)
            tensor = plan.fetch.get(key)
            if kind not in ("grad", "lr") or tensor is None or MICRO in name:
                continue
            self.feeds[tensor.name] = value
            for twin in _twins(copy.graph.get_tensor_by_name(tensor.name)):
                self.feeds.setdefault(twin, value)
            if kind == "grad" and UNCLIPPED not in name and not name.endswith("/indices"):
                self.grads[name[:-len("/values")] if name.endswith("/values") else name] = tensor.name
        self.updates = [u for u in plan.updates if u.var is not None and u.var in before]
        self.reads = list(dict.fromkeys(n for u in self.updates for n in [u.var] + list(u.slots) if n in before))

    def run(self, overrides: Optional[Mapping[str, Any]] = None, advance: int = 0,
            reads: Optional[Sequence[str]] = None,
            kept: Optional[Callable[[str, np.ndarray], np.ndarray]] = None) -> Dict[str, np.ndarray]:
        """The variables and slots after the step's update ops (`reads` of them, else all), from
        the state it started from (`advance`: with the step counter moved on by that many steps;
        `kept`: GraphCopy.rerun's)."""
        feeds = dict(self.feeds)
        feeds.update(overrides or {})
        self.copy.load(self.state(advance), feeds)
        return self.copy.rerun(self._plan.targets, self.reads if reads is None else reads, kept)

    def state(self, advance: int) -> Mapping[str, Any]:
        """The state the step started from, the step counter moved on by `advance`."""
        if not advance:
            return self.before
        state = dict(self.before)
        state[self.counter] = np.asarray(self.before[self.counter] + advance, np.asarray(self.before[
            self.counter]).dtype)
        return state

    def audit(self, step: int, after: Mapping[str, Any]) -> Tuple[StepAudit, Optional[Dict[str, np.ndarray]]]:
        """Each update's variable and slots, re-executed, against `after` (name -> recorded value)."""
        # Where it gives the recorded value bit for bit (the same kernels on the same machine, as a
        # rule), the recorded array stands for it as it is read: one copy of the model's state fewer
        # is held, here and through the claims' probes (claims.py), which compare against it.
        def kept(name: str, value: np.ndarray) -> np.ndarray:
            return after[name] if name in after and same_bits(value, after[name]) else value
        try:
            got = self.run(kept=kept)
        except Exception as exc:  # the copy cannot run them: said, per variable
            why = "its update could not be re-executed (%s: %s)" % (type(exc).__name__, _first_line(exc))
            return StepAudit(step, tuple(VariableAudit(u.var, u.kind, NOT_AUDITABLE, why, by=RERUN)
                                         for u in self.updates)), None
        out = []
        for update in self.updates:
            names = [n for n in [update.var] + list(update.slots) if n in got and n in after]
            out.append(_verdict(update, names, got, after, self.before, self._keys))
        return StepAudit(step, tuple(out)), got

    def rates(self, names: Sequence[str], advance: int = 0) -> Dict[str, Any]:
        """Scalars' values at the step (`advance`: the counter moved on): as recorded, else
        computed in the copy."""
        out = {name: self.feeds[name] for name in names if name in self.feeds and not advance}
        missing = [name for name in names if name not in out]
        if missing:
            try:
                self.copy.load(self.state(advance), self.feeds)
                out.update(zip(missing, self.copy.evaluate(missing)))
            except Exception:  # its probes then fail, and say why
                pass
        return out

    def probe(self, overrides: Mapping[str, Any], advance: int = 0,
              reads: Optional[Sequence[str]] = None) -> "Dict[str, np.ndarray] | str":
        """`run`, or why it could not."""
        try:
            return self.run(overrides, advance, reads)
        except Exception as exc:
            return "%s: %s" % (type(exc).__name__, _first_line(exc))


def _verdict(update: Any, names: Sequence[str], got: Mapping[str, Any], after: Mapping[str, Any],
             before: Mapping[str, Any], keys: Mapping[str, str]) -> VariableAudit:
    if not names:
        return VariableAudit(update.var, update.kind, NOT_AUDITABLE, "re-executed, but its variable after the step "
                             "was not recorded whole", by=RERUN)
    worst: Tuple[float, float, str, str] = (0.0, 0.0, "", "")  # ulps, abs, name, where
    shown = []
    for name in names:
        ulps, diff, where = compare(after[name], got[name], before.get(name))
        shown.append("%s %.3g" % ("var" if name == update.var else "slot " + _short(name, update.var), ulps))
        if ulps > worst[0] or not worst[2]:
            worst = (ulps, diff, name, where)
    ulps, diff, name, where = worst
    if ulps <= RERUN_ULPS:
        return VariableAudit(update.var, update.kind, AGREES, "re-executed: %s ulps of scale (limit %g)" % (
            ", ".join(shown), RERUN_ULPS), ulps, diff, keys.get(name, name), by=RERUN)
    return VariableAudit(update.var, update.kind, DISAGREES,
                         "re-executing its update from the recorded state, gradient and learning rate gives %s %s "
                         "(%.3g ulps of scale; limit %g): the golden's step is not what its update computes" % (
                             keys.get(name, name), where, ulps, RERUN_ULPS), ulps, diff, keys.get(name, name),
                         by=RERUN)


_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def same_bits(a: Any, b: Any) -> bool:
    """Whether two arrays hold the same bits (-0.0 is not 0.0; a NaN equals its own bits), with
    no copy of either."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape or a.dtype.hasobject:
        return False
    bits = _UNSIGNED.get(a.dtype.itemsize, np.uint8)  # compared as unsigned integers of the same width
    return bool(np.array_equal(np.ascontiguousarray(a).reshape(-1).view(bits),
                               np.ascontiguousarray(b).reshape(-1).view(bits)))


def _twins(tensor: Any) -> List[str]:
    """The tensors computing what `tensor` does, by the same op on the same inputs: each use of a
    sparse gradient in dense arithmetic converts its rows anew (`tf.square(grad)` too), and each
    conversion is fed the value recorded, else the copy would compute it again, from a backward
    pass whose reads the re-executed updates may overtake."""
    op = tensor.op
    if op.type not in DENSE_CONVERSIONS:
        return []
    rows = [t.name for t in op.inputs[:2]]  # the rows and their ids (each conversion slices the shape anew)
    return [c.outputs[tensor.value_index].name for c in op.inputs[0].consumers()
            if c.name != op.name and c.type == op.type and [t.name for t in c.inputs[:2]] == rows]


def _short(slot: str, var: str) -> str:
    name, owner = slot.rsplit(":", 1)[0], var.rsplit(":", 1)[0]
    return name[len(owner) + 1:] if name.startswith(owner + "/") else name.rsplit("/", 1)[-1]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""

