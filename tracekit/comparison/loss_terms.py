"""A slip in one part of the loss, named from the parts the recorder found (record/terms.py).

The golden's loss is a sum of terms, c_i x t_i, whose coefficients its metadata holds and whose
values each step's info holds, checked by the recorder to sum to the loss. Where the port's loss
differs from the golden's at a step that started from the golden's state, each term is tried
with its coefficient times a usual factor (a sign flipped: -1, left out: 0, doubled or halved,
and so on): the port's loss must be the golden's plus (factor - 1) x c_i x t_i within the loss's
tolerance, at every such step the comparison kept, removing at least three quarters of the
difference where it failed. The slip is named only where exactly one term and factor fit.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..keys import LOSSES, TERM, make_key, split_key
from ..store import Trace
from .fingerprints import Fingerprint, Resolve
from .fitting import LEFT
from .stats import compare_values

LOSS_TERM = "loss-term"
# The factors a port puts on one part of a loss by mistake: a sign, left out, doubled or halved
# (a mean against a sum of two, a coefficient of 0.5 for 0.25), ten times.
FACTORS = (-1.0, 0.0, 2.0, 0.5, 4.0, 0.25, 10.0, 0.1)


def terms_of(golden: Trace, key: str) -> Optional[List[Tuple[str, float]]]:
    """(tensor, coefficient) of each part of a loss, as the recorder found and checked them."""
    for losses in (golden.meta.get(LOSSES) or {}).values():
        entry = losses.get(key) if isinstance(losses, dict) else None
        terms = entry.get("terms") if isinstance(entry, dict) else None
        if isinstance(terms, dict) and terms.get("parts"):
            return [(str(t["tensor"]), float(t["coefficient"])) for t in terms["parts"]]
    return None


def loss_term(golden: Trace, key: str, first: int, losses: Mapping[int, Tuple[float, float]],
              resolve: Resolve) -> Optional[Fingerprint]:
    """The one term whose factor explains the port's loss `key` (golden, port) at the steps of
    `losses` (those that started from the golden's state), `first` being the failing one."""
    terms = terms_of(golden, key)
    if terms is None or first not in losses:
        return None
    name = split_key(key)[1]
    values: Dict[int, List[float]] = {}
    for step in losses:
        found = (golden.step(step).info.get("loss_terms") or {}).get(key)
        if isinstance(found, list) and len(found) == len(terms):
            values[step] = [float(v) for v in found]
    if first not in values:
        return None
    fits = []
    for index, (tensor, coefficient) in enumerate(terms):
        for factor in FACTORS:
            worst = _fits(losses, values, index, coefficient, factor, first, resolve, name)
            if worst is not None:
                fits.append((index, tensor, coefficient, factor, worst))
    if len(fits) != 1:
        return None  # none fits, or more than one: nothing is named
    index, tensor, coefficient, factor, worst = fits[0]
    return Fingerprint(LOSS_TERM, first, (key,), coefficient, coefficient * factor, worst,
                       {"term": index, "terms": len(terms), "factor": factor, "steps": len(values), "tensor": tensor,
                        "part": make_key("loss", "%s%s%d" % (name, TERM, index))})


def source_key(hint: Fingerprint) -> Optional[str]:
    """The tensor whose source line a fingerprint shows: the part of the loss it names (the
    recorder keeps each part's line under its key), else the first tensor it explains."""
    part = hint.detail.get("part")
    return part if isinstance(part, str) else (hint.keys[0] if hint.keys else None)


def _fits(losses: Mapping[int, Tuple[float, float]], values: Mapping[int, List[float]], index: int,
          coefficient: float, factor: float, first: int, resolve: Resolve, name: str) -> Optional[float]:
    """The ulps left where the factor on that term predicts the port's loss at every step, else None."""
    worst = 0.0
    for step, parts in values.items():
        golden, port = losses[step]
        predicted = golden + (factor - 1.0) * coefficient * parts[index]
        stats = compare_values(np.float64(predicted), np.float64(port), resolve("loss", name, step, "float32"))
        if not stats.ok or (step == first and abs(predicted - port) > LEFT * abs(port - golden)):
            return None
        worst = max(worst, stats.ulps)
    return worst
