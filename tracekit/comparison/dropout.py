"""A dropout that takes the golden's draws at another rate than TF1's: named from the draws.

A replay feeds each of the port's random draws the golden's numbers (the random tape), so a
draw compares equal whatever the port does with it. A port whose dropout drops at 0.5 where
TF1's dropped at 0.3 keeps other units from the same numbers; its loss departs at the first
step and nothing else says why. The golden keeps each draw's TF1 rate (meta["draws"]), the
replay the rate of the port's dropout that took it (meta["replay"]["draw_rates"]): where they
differ, the slip is named with both kept fractions, and the draw is marked as used otherwise.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

import numpy as np

from ..keys import DRAWS, make_key
from ..store import Trace
from .slips import SlipHint

DROPOUT_RATE = "dropout-rate"


def rates(golden_meta: Mapping[str, Any], replay_rates: Mapping[str, float]) -> Dict[str, Dict[str, float]]:
    """"random/<tensor>" -> {"golden": TF1's rate, "actual": the port's} for each draw whose
    two rates are known and differ."""
    uses = golden_meta.get(DRAWS) if isinstance(golden_meta.get(DRAWS), dict) else {}
    out = {}
    for name, port in replay_rates.items():
        key = make_key("random", name)
        use = uses.get(key)
        if not isinstance(use, dict) or not isinstance(use.get("rate"), (int, float)):
            continue
        tf1 = float(use["rate"])
        if abs(tf1 - float(port)) > 1e-6 * max(1.0, abs(tf1)):
            out[key] = {"golden": tf1, "actual": float(port)}
    return out


def dropout_slips(golden: Trace, step: int, differing: Mapping[str, Mapping[str, float]]) -> List[SlipHint]:
    """The slip each draw in `differing` (rates()) makes: both rates, and the share of the
    golden's draw at `step` (its first step, if it was not drawn then) each rate keeps."""
    hints = []
    for key, pair in sorted(differing.items()):
        found = ((i, golden.step(i).get(key)) for i in [step, *range(len(golden))] if 0 <= i < len(golden))
        at, value = next(((i, v) for i, v in found if v is not None), (None, None))
        if value is None:
            continue
        draws = np.asarray(value, np.float64)
        hints.append(SlipHint(DROPOUT_RATE, at, key, {
            "golden": pair["golden"], "actual": pair["actual"],
            "kept_golden": float(np.mean(draws >= pair["golden"])), "kept_actual": float(np.mean(draws >= pair["actual"]))}))
    return hints
