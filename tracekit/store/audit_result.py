"""The update audit's results (store/audit.py computes them): a variable's verdict at a step
(VariableAudit), a step's verdicts (StepAudit), and a golden's audit (AuditResult), the summary
over its steps; `AuditResult.to_meta()` is what a golden keeps under meta["audit"] and
`AuditResult.of()` reads it back. Rendered by report/audit.py. Python 3.7 syntax, no numpy.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

AGREES = "agrees"
DISAGREES = "disagrees"
OTHER_RATE = "agrees at another step's rate"
NOT_AUDITABLE = "not auditable"
# A step whose gradient is not finite left the variable and its slots as they were (a loss-scale
# optimizer applies only finite gradients): no update ran to recompute.
NOT_APPLIED = "not applied"
VERDICTS = (DISAGREES, OTHER_RATE, AGREES, NOT_APPLIED, NOT_AUDITABLE)  # a summary over steps shows the first found
# How far a recorded element may be from the float64 recomputation, in ulps of its scale (the
# kernel's error bound, every operation charged a whole ulp of its result): a faithful float32
# kernel stays within 0.5; the rest covers reassociation (GPU kernels) and second-order terms.
LIMIT_ULPS = 4.0
# How a verdict was reached: the kernel's rule recomputed in float64 (store/update_rules.py), the
# update's own ops run again by the recorder (record/rerun.py), or both, agreeing.
RULE, RERUN, BOTH = "rule", "re-execution", "rule and re-execution"
# Re-executed against recorded, in ulps of each element's scale (its largest magnitude before,
# after or re-executed): the same kernels on the same machine, reassociated at most.
RERUN_ULPS = 16.0


@dataclass(frozen=True)
class VariableAudit:
    """One variable's verdict at a step (or, in AuditResult.variables, over the steps audited)."""

    var: str
    update: str  # the update op's type, "assign" for a hand-written update, "" if not recorded
    verdict: str  # AGREES, DISAGREES, OTHER_RATE, NOT_APPLIED or NOT_AUDITABLE
    detail: str  # the errors per tensor; which tensor disagrees and by how much; why not auditable
    max_ulps: Optional[float] = None  # the largest error, in ulps of its element's scale
    max_abs: Optional[float] = None  # the largest absolute error
    tensor: Optional[str] = None  # the key of the tensor disagreeing (else of the largest error)
    lr_step: Optional[int] = None  # OTHER_RATE: the step whose learning rate the update read
    step: Optional[int] = None  # a summary: the step the verdict shown was found at
    tally: Tuple[Tuple[str, int], ...] = ()  # a summary: how many steps gave each verdict
    by: str = RULE  # RULE, RERUN or BOTH

    @property
    def ok(self) -> bool:
        return self.verdict != DISAGREES

    def to_meta(self) -> Dict[str, Any]:
        out = {"var": self.var, "update": self.update, "verdict": self.verdict, "detail": self.detail}
        for name in ("max_ulps", "max_abs", "tensor", "lr_step", "step"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.tally:
            out["tally"] = [list(pair) for pair in self.tally]
        if self.by != RULE:
            out["by"] = self.by
        return out

    @classmethod
    def of(cls, meta: Mapping[str, Any]) -> "VariableAudit":
        return cls(str(meta.get("var")), str(meta.get("update") or ""), str(meta.get("verdict")),
                   str(meta.get("detail") or ""), meta.get("max_ulps"), meta.get("max_abs"), meta.get("tensor"),
                   meta.get("lr_step"), meta.get("step"),
                   tuple((str(v), int(n)) for v, n in meta.get("tally") or ()), str(meta.get("by") or RULE))


@dataclass(frozen=True)
class StepAudit:
    """The verdicts of one step's variables."""

    step: int
    variables: Tuple[VariableAudit, ...] = ()

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.variables)


@dataclass(frozen=True)
class AuditResult:
    """A golden's audit: one verdict per variable over the steps audited (`variables`), the
    steps audited and those skipped with why; `steps` holds each step's own verdicts (in memory
    only: the metadata keeps the summary)."""

    variables: Tuple[VariableAudit, ...] = ()
    audited: Tuple[int, ...] = ()
    skipped: Tuple[Tuple[int, str], ...] = ()  # (step, why it was not audited)
    limit_ulps: float = LIMIT_ULPS
    steps: Tuple[StepAudit, ...] = field(default=(), compare=False)
    path: Optional[str] = None

    @property
    def ok(self) -> bool:
        """No variable disagrees (a variable not auditable is no failure)."""
        return all(v.ok for v in self.variables)

    def count(self, verdict: str) -> int:
        return sum(1 for v in self.variables if v.verdict == verdict)

    @classmethod
    def of_steps(cls, steps: Sequence[StepAudit], skipped: Sequence[Tuple[int, str]] = (),
                 path: Optional[str] = None, limit_ulps: float = LIMIT_ULPS) -> "AuditResult":
        """The summary of step audits: per variable, its first disagreement, else its first
        agreement at another step's rate, else its largest error among the steps it agrees at,
        else why it was not auditable at its first step."""
        found: Dict[str, List[Tuple[int, VariableAudit]]] = collections.OrderedDict()
        for s in steps:
            for v in s.variables:
                found.setdefault(v.var, []).append((s.step, v))
        summary = []
        for records in found.values():
            tally = collections.Counter(v.verdict for _, v in records)
            verdict = next(v for v in VERDICTS if tally[v])
            chosen = [(k, v) for k, v in records if v.verdict == verdict]
            k, shown = max(chosen, key=lambda kv: kv[1].max_ulps or 0.0) if verdict == AGREES else chosen[0]
            summary.append(replace(shown, step=k, tally=tuple((v, tally[v]) for v in VERDICTS if tally[v])))
        return cls(tuple(summary), tuple(s.step for s in steps), tuple(skipped), limit_ulps, tuple(steps), path)

    def to_meta(self) -> Dict[str, Any]:
        """The msgpack form a golden keeps under meta["audit"]: skipped steps grouped by why."""
        why: Dict[str, List[int]] = collections.OrderedDict()
        for k, reason in self.skipped:
            why.setdefault(reason, []).append(k)
        return {"version": 1, "limit_ulps": self.limit_ulps, "audited": list(self.audited),
                "skipped": [[reason, ks] for reason, ks in why.items()],
                "variables": [v.to_meta() for v in self.variables]}

    @classmethod
    def of(cls, meta: Any, path: Optional[str] = None) -> "AuditResult":
        """The audit a golden keeps (meta["audit"]); an empty one for anything else."""
        if not isinstance(meta, Mapping):
            return cls(path=path)
        skipped = tuple((int(k), str(reason)) for reason, ks in meta.get("skipped") or () for k in ks)
        return cls(tuple(VariableAudit.of(v) for v in meta.get("variables") or () if isinstance(v, Mapping)),
                   tuple(int(k) for k in meta.get("audited") or ()), tuple(sorted(skipped)),
                   float(meta.get("limit_ulps", LIMIT_ULPS)), (), path)

