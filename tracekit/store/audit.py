"""The update audit: does a golden's training step hold what its optimizer's update op computes?

For each variable a step updates with a known TF1 update op (update_rules.py), the variable
and its slots after the step are recomputed in float64 from those before it, the recorded
gradient, the learning rate and the hyperparameters, and compared with the recorded ones within
the float32 round-off of the kernel's arithmetic (its bound, in ulps of each element's scale;
LIMIT_ULPS of it). A variable's verdict: it agrees; it disagrees (the tensor, by how much);
it agrees with the learning rate another step recorded (a racy read of the step counter); or
it is not auditable, and why: the audit never guesses what a golden does not hold.

One variable's check at one step is update_check.py's. Results are data: the frozen records of
audit_result.py (`AuditResult.to_meta()` is what a golden keeps under meta["audit"]),
re-exported here, rendered by report/audit.py. Numpy only, Python 3.7 syntax.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..errors import UsageError
from ..keys import REEXECUTED, sparse_owner, step_label
from .audit_result import (AGREES, BOTH, DISAGREES, LIMIT_ULPS, NOT_AUDITABLE, OTHER_RATE, RERUN, AuditResult,
                           StepAudit, VariableAudit)
from .audit_result import VERDICTS  # noqa: F401  # re-exported: report/audit.py imports these from here
from .update_check import NotAuditable, StepContext, array_of


def audit_step(facts_by_var: Optional[Mapping[str, Any]], slots_meta: Optional[Mapping[str, Any]],
               before: Mapping[str, Any], after: Mapping[str, Any], step_values: Mapping[str, Any],
               races: Sequence[Any] = (), *, step: int = 0,
               rates_nearby: Optional[Mapping[int, Mapping[str, Any]]] = None,
               declared_rates: Sequence[str] = (), limit_ulps: float = LIMIT_ULPS) -> StepAudit:
    """Audit one step from values in memory: `before` and `after` hold the state ("var/..",
    "slot/..") before and after it, `step_values` its gradients ("grad/..") and learning rates
    ("lr/.."); `facts_by_var` is a golden's meta["updates"] (None: not recorded), `slots_meta`
    its meta["slots"], `races` its meta["races"]. `rates_nearby` ({step: {"lr/..": value}}, the
    steps before and after this one) lets a disagreement be told apart from a racy read of the
    step counter; `declared_rates` are the learning rates the recording was told of."""
    slots = slots_by_var(slots_meta)
    grads = _gradient_vars(step_values)
    names = list(facts_by_var or ()) + [v for v in grads if v not in (facts_by_var or ())]
    context = StepContext(before, after, step_values, races, step, rates_nearby or {}, tuple(declared_rates),
                       limit_ulps)
    out = []
    for var in names:
        if var not in grads and _unchanged(before.get("var/" + var), after.get("var/" + var)):
            continue  # a variable this step did not update (a GAN's other network)
        fact = (facts_by_var or {}).get(var)
        update = str(fact.get("update") or "") if isinstance(fact, Mapping) else ""
        if not update:
            update = next((str(s.get("update")) for s in (slots_meta or {}).values()
                           if isinstance(s, Mapping) and s.get("var") == var), "")
        try:
            if facts_by_var is None:
                raise NotAuditable("the golden records no update facts (meta \"updates\": recorded before the "
                                    "recorder kept them); record it again to audit it")
            out.append(context.audit(var, update, fact, slots.get(var, {})))
        except NotAuditable as exc:
            out.append(VariableAudit(var, update, NOT_AUDITABLE, str(exc)))
    return StepAudit(step, tuple(out))


def audit_trace(trace: Any, steps: Optional[Iterable[int]] = None, limit: Optional[int] = None,
                limit_ulps: float = LIMIT_ULPS) -> AuditResult:
    """Audit a golden (a tracekit.Trace): every step whose state before and after it is kept
    whole (or those of `steps`), at most `limit` of them; the others are listed as skipped."""
    meta = trace.meta
    facts = meta.get("updates") if isinstance(meta.get("updates"), Mapping) else None
    races = [r for r in meta.get("races") or () if isinstance(r, Mapping)]
    declared = meta.get("declared") if isinstance(meta.get("declared"), Mapping) else {}
    n = len(trace)
    done: List[StepAudit] = []
    skipped: List[Tuple[int, str]] = []
    for k in range(n) if steps is None else steps:
        if not -n <= k < n:
            raise UsageError("%s has %d steps; step %d does not exist" % (trace.path, n, k))
        k = k % n
        if limit is not None and len(done) >= limit:
            break
        if trace.before(k) is None:
            skipped.append((k, "no initial state recorded"))
            continue
        try:
            before = _state(trace.state_before(k))  # with what ran between the steps, where recorded
        except UsageError:
            before = {}
        if not before:
            skipped.append((k, "%s keeps no variable whole (a step between keyframes)" % step_label(k - 1)))
            continue
        values = trace.step(k)
        after = _state(values)
        if not after:
            skipped.append((k, "it keeps no variable whole (a step between keyframes)"))
            continue
        nearby = {j: {key: trace.step(j)[key] for key in trace.step(j) if key.startswith("lr/")}
                  for j in (k - 1, k + 1) if 0 <= j < n}
        done.append(audit_step(facts, meta.get("slots"), before, after, values, races, step=k,
                               rates_nearby=nearby, declared_rates=declared.get("learning_rates") or (),
                               limit_ulps=limit_ulps))
    rerun = AuditResult.of(meta[REEXECUTED]) if isinstance(meta.get(REEXECUTED), Mapping) else None
    return with_reexecution(AuditResult.of_steps(done, skipped, trace.path, limit_ulps), rerun)


def with_reexecution(rule: AuditResult, rerun: Optional[AuditResult]) -> AuditResult:
    """Each variable's verdict by its kernel rule (`rule`) joined with the recorder's re-execution
    of its update (`rerun`, what a golden keeps under meta["reexecuted"]; None: not recorded): a
    variable no rule audits takes the re-execution's verdict; where both judge, they must agree."""
    found = {v.var: v for v in (rerun.variables if rerun is not None else ())}
    out = [_joined(v, found.pop(v.var, None), rerun is not None) for v in rule.variables]
    out += [v for v in found.values()]
    return replace(rule, variables=tuple(out))


def _joined(rule: VariableAudit, rerun: Optional[VariableAudit], recorded: bool) -> VariableAudit:
    if rerun is None or rerun.verdict == NOT_AUDITABLE:
        if rule.verdict != NOT_AUDITABLE:
            return rule
        why = rerun.detail if rerun is not None else (
            "not re-executed when it was recorded" if recorded else
            "and the golden holds no re-execution of it (recorded before tracekit re-executed updates: record it "
            "again)")
        return replace(rule, detail="%s; %s" % (rule.detail, why))
    steps = "re-executed when recorded (step %s)" % rerun.step if rerun.step is not None else "re-executed"
    if rule.verdict == NOT_AUDITABLE:
        return replace(rerun, detail="%s; %s" % (rerun.detail.replace("re-executed", steps, 1), rule.detail),
                       tally=rerun.tally, by=RERUN)
    if rerun.verdict == DISAGREES and rule.verdict != DISAGREES:
        return replace(rerun, detail="its kernel rule %s, but %s" % (rule.verdict, rerun.detail), by=RERUN)
    if rule.verdict == DISAGREES:
        return replace(rule, detail="%s (its re-execution when recorded %s)" % (rule.detail, rerun.verdict))
    return replace(rule, by=BOTH)


def _state(values: Mapping[str, Any]) -> Dict[str, Any]:
    """The variables and slots a step keeps whole ({} if none of its variables is); not the
    values noted beside them ("<var>@before": no TF name holds an "@")."""
    state = {key: values[key] for key in values if key.startswith(("var/", "slot/")) and "@" not in key}
    whole = any(key.startswith("var/") and array_of(v) is not None for key, v in state.items())
    return state if whole else {}


def _unchanged(before: Any, after: Any) -> bool:
    a, b = array_of(before), array_of(after)
    return a is not None and b is not None and a.shape == b.shape and a.tobytes() == b.tobytes()


def slots_by_var(slots_meta: Optional[Mapping[str, Any]]) -> Dict[str, Dict[str, str]]:
    """{variable: {argument: slot name}} from a golden's meta["slots"]."""
    out: Dict[str, Dict[str, str]] = {}
    for slot, fact in (slots_meta or {}).items():
        if isinstance(fact, Mapping) and fact.get("var") and fact.get("arg"):
            out.setdefault(str(fact["var"]), {})[str(fact["arg"])] = slot
    return out


def _gradient_vars(values: Mapping[str, Any]) -> List[str]:
    """The variables a step holds a gradient of (dense or sparse; not the unclipped ones)."""
    out: List[str] = []
    for key in values:
        if not key.startswith("grad/") or "@" in key:
            continue
        name = key[len("grad/"):]
        var = sparse_owner(name) or name
        if var not in out:
            out.append(var)
    return out
