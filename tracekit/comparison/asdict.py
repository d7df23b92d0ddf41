"""A comparison as plain data (JSON-serializable), for CI dashboards and other tools.

The shape is versioned by SCHEMA. Floats that JSON cannot hold (inf: "no rtol would pass a
difference at a golden zero"; nan) are written as the strings "inf", "-inf" and "nan", so
the output is strict JSON. Steps are numbered from 0; -1 is the initial state.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, Optional

import numpy as np

from .select import Selection

# result.py's Comparison, Divergence and TensorResult come in as Any: result.py imports this module.

SCHEMA = 1

# Per-step statistics kept for each tensor when by_step is asked for, as parallel lists.
STEP_FIELDS = ("max_abs", "max_rel", "ulps", "mismatched", "total")


def plain(value: Any) -> Any:
    """`value` with only JSON types: dataclasses and mappings become dicts (string keys),
    sequences lists, numpy scalars and arrays Python numbers and lists, bytes text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    to_dict = getattr(value, "to_dict", None)
    return plain(to_dict()) if callable(to_dict) else str(value)


def divergence_dict(d: Any) -> Dict[str, Any]:
    return {"step": d.step, "kind": d.kind, "name": d.name, "key": d.key, "stats": plain(d.stats.to_dict()),
            "golden_at_worst": plain(d.golden_at_worst), "actual_at_worst": plain(d.actual_at_worst),
            "noise": plain(d.noise)}


def tensor_dict(t: Any, by_step: bool = True, selection: Optional[Selection] = None) -> Dict[str, Any]:
    """One tensor's results; with a selection, over the steps it shows (the whole run's
    counts stay under "steps", "failed_steps" and "first_failed")."""
    steps = list(t.by_step) if selection is None else selection.steps_of(t)
    worst_step, worst = (t.worst_step, t.worst) if selection is None else selection.worst(t, steps)
    out: Dict[str, Any] = {
        "kind": t.kind, "name": t.name, "key": t.key, "ok": t.ok, "steps": t.steps, "failed_steps": t.failed_steps,
        "accepted_steps": t.accepted_steps, "first_failed": t.first_failed, "worst_step": worst_step,
        "worst": None if worst is None else plain(worst.to_dict()),
        "max_ulps": plain(max((t.by_step[s].ulps for s in steps), default=0.0)),
        "driven_by_noise": t.driven_by_noise, "noise_steps": sorted(t.noise), "form": t.form,
        "digest_steps": t.digest_steps}
    if by_step:
        series = [(step, t.by_step[step]) for step in steps]
        out["by_step"] = {"step": [step for step, _ in series],
                          "ok": [s.ok for _, s in series],
                          **{name: [plain(getattr(s, name)) for _, s in series] for name in STEP_FIELDS}}
    return out


def drift_dict(drift: Any) -> Dict[str, Any]:
    """The drift view of a long golden's verdict: the port from its own state against the envelope."""
    first = drift.first_divergence
    return {"ok": drift.ok, "actual": drift.actual, "steps": drift.steps, "missing": list(drift.missing),
            "short": drift.short, "first_divergence": None if first is None else divergence_dict(first),
            "max_errors": plain(drift.max_errors()), "notes": list(drift.notes),
            "crossings": None if drift.arbitration is None else plain(drift.arbitration.to_dict())}


def comparison_dict(result: Any, by_step: bool = True, selection: Optional[Selection] = None
                    ) -> Dict[str, Any]:
    """Everything a Comparison holds; `by_step`: each tensor's statistics at every step too;
    `selection`: only the tensors and steps it shows (the verdict is still the whole run's)."""
    first = result.first_divergence
    if selection is not None and selection.everything:
        selection = None
    shown = [(t, None if selection is None else selection.steps_of(t)) for t in result.tensors]
    cause = result.likely_cause
    return {
        "schema": SCHEMA,
        "ok": result.ok,
        "verdict": "MATCH" if result.ok else "MISMATCH",
        "golden": result.golden,
        "actual": result.actual,
        "steps": result.steps,
        "forcing": result.forcing,
        "forced": plain(result.forced),
        "loaded": plain(result.loaded),
        "raced": plain(result.raced),
        "advice": result.advice,
        "golden_steps": result.golden_steps,
        "actual_steps": result.actual_steps,
        "profile": {"name": result.profile.name, "reason": result.profile.reason,
                    "tolerance": plain(result.tolerance.to_dict())},
        "first_divergence": None if first is None else divergence_dict(first),
        "likely_cause": None if cause is None else plain(cause),
        "conventions": plain(result.conventions),
        "slips": plain(result.slips),
        "fingerprints": plain(result.fingerprints),
        "sources": plain(result.sources),
        "distribution": plain(result.distribution),
        "distribution_hints": plain(result.distribution_hints),
        "noise": plain(result.noise),
        "environment_diff": plain(result.environment_diff.to_dict()),
        "max_errors": plain(result.max_errors()),
        "missing": list(result.missing),
        "not_compared": dict(result.not_compared),
        "notes": list(result.notes),
        "short": result.short,
        "uncompared": result.uncompared,
        "golden_provenance": None if result.golden_provenance is None else plain(result.golden_provenance),
        "judged": result.judged,
        "arbitration": None if result.arbitration is None else plain(result.arbitration.to_dict()),
        "drift": None if result.drift is None else drift_dict(result.drift),
        "selection": None if selection is None else selection.describe(),
        "tensors": [tensor_dict(t, by_step, selection) for t, steps in shown if steps is None or steps],
    }

