"""Text for the update audit (store/audit.py): `tracekit verify --audit` and `tracekit show`."""

from __future__ import annotations

import collections
from typing import Dict, List, Optional, Sequence

from ..store.audit import AGREES, DISAGREES, NOT_AUDITABLE, OTHER_RATE, VERDICTS, AuditResult, VariableAudit
from ..store.audit_result import RERUN_ULPS, RULE
from .text import table

NAMES_SHOWN = 5  # variables named per reason they are not auditable; the rest are counted


def audit_lines(result: AuditResult, width: Optional[int] = None) -> List[str]:
    """A one-line summary, a table of the variables' verdicts, then what each disagreement is
    and why variables are not auditable (variables sharing a reason on one line)."""
    lines = ["audit     %s" % summary(result)]
    why: Dict[str, List[int]] = collections.OrderedDict()
    for k, reason in result.skipped:
        why.setdefault(reason, []).append(k)
    lines += ["skipped   %s %s: %s" % ("step" if len(ks) == 1 else "steps", spans(ks), reason)
              for reason, ks in why.items()]
    if not result.variables:
        return lines
    rows = [[v.var, v.update or "-", v.verdict, v.by if v.verdict != NOT_AUDITABLE else "-", _steps(v),
             "-" if v.max_ulps is None else "%.3g" % v.max_ulps] for v in result.variables]
    lines.extend(table(["variable", "update", "verdict", "by", "steps", "max ulps"], rows, right=(5,), width=width,
                       shrink=0))
    for v in result.variables:
        if v.verdict in (DISAGREES, OTHER_RATE):
            lines.append("  %s %s at %s: %s" % (v.var, v.verdict, "step %s" % v.step if v.step is not None
                                                else "its step", v.detail))
    unsure: Dict[str, List[str]] = collections.OrderedDict()
    for v in result.variables:
        if v.verdict == NOT_AUDITABLE:
            unsure.setdefault(v.detail, []).append(v.var)
    for reason, names in unsure.items():
        more = len(names) - NAMES_SHOWN
        lines.append("  not auditable: %s: %s%s" % (reason, ", ".join(names[:NAMES_SHOWN]),
                                                     " and %d more" % more if more > 0 else ""))
    return lines


def summary(result: AuditResult) -> str:
    """"5 steps audited (2 skipped): 3 variables agree, 1 disagrees, ... (limit 4 ulps of scale)"."""
    audited = len(result.audited)
    head = "%s audited%s" % ("no step" if not audited else "%d step%s" % (audited, "" if audited == 1 else "s"),
                             " (%d skipped)" % len(result.skipped) if result.skipped else "")
    if not result.variables:
        return head
    counts = ["%d %s" % (result.count(v), _plural(v, result.count(v))) for v in VERDICTS if result.count(v)]
    rerun = any(v.by != RULE for v in result.variables)
    return "%s: %s (limit %g ulps of scale by rule%s)" % (head, ", ".join(counts), result.limit_ulps,
                                                          ", %g re-executed" % RERUN_ULPS if rerun else "")


def _plural(verdict: str, n: int) -> str:
    if n == 1:
        return "variable " + verdict
    return {AGREES: "variables agree", DISAGREES: "variables disagree",
            OTHER_RATE: "variables agree at another step's rate"}.get(verdict, "variables " + verdict)


def _steps(v: VariableAudit) -> str:
    """How many steps gave each verdict: "5", or "4 agree, 1 not auditable"."""
    if len(v.tally) <= 1:
        return str(v.tally[0][1]) if v.tally else "1"
    return ", ".join("%d %s" % (n, "agree" if verdict == AGREES else "disagree" if verdict == DISAGREES else verdict)
                     for verdict, n in v.tally)


def spans(steps: Sequence[int]) -> str:
    """1-4, 6, 9-10."""
    out: List[List[int]] = []
    for k in sorted(steps):
        if out and out[-1][1] == k - 1:
            out[-1][1] = k
        else:
            out.append([k, k])
    return ", ".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in out)
