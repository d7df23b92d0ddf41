"""A slip in one part of the loss, named from the parts the recorder found (record/terms.py), or
from the scalar taps both sides take of it.

The golden's loss is a sum of terms, c_i x t_i, whose coefficients its metadata holds and whose
values each step's info holds, checked by the recorder to sum to the loss. Where the port's loss
differs from the golden's at a step that started from the golden's state, each term is tried
with its coefficient times a usual factor (a sign flipped: -1, left out: 0, doubled or halved,
and so on): the port's loss must be the golden's plus (factor - 1) x c_i x t_i within the loss's
tolerance, at every such step the comparison kept, removing at least three quarters of the
difference where it failed. The slip is named only where exactly one term and factor fit.

Where the golden holds no parts, its scalar taps stand in for them (`tracekit.tap("vf_loss",
vf_loss)` on both sides): the port's loss minus the golden's is fitted, over the steps from the
golden's state, to c x one tap's value, the same c at every step. At least ELEMENTS_PER_PARAMETER
such steps, whose tap values differ, are needed (one step fits any tap), and exactly one tap must
fit. The coefficient a tap carries in TF1's loss is not known: what is named is the weight the
port adds to (or takes from) that tap.
"""

from __future__ import annotations

import itertools
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..keys import LOSSES, TERM, make_key, split_key
from ..store import Trace
from .fingerprints import Fingerprint, Resolve
from .fitting import ELEMENTS_PER_PARAMETER, EPS32, LEFT
from .stats import compare_values

LOSS_TERM = "loss-term"
LOSS_TAP = "loss-tap"  # the port's loss weighs one tapped part otherwise
# The factors a port puts on one part of a loss by mistake: a sign, left out, doubled or halved
# (a mean against a sum of two, a coefficient of 0.5 for 0.25), ten times.
FACTORS = (-1.0, 0.0, 2.0, 0.5, 4.0, 0.25, 10.0, 0.1)
PAIR_STEPS = 3  # two terms changed at once are tried only over this many steps from the golden's state


def terms_of(golden: Trace, key: str) -> Optional[List[Tuple[str, float]]]:
    """(tensor, coefficient) of each part of a loss, as the recorder found and checked them."""
    for losses in (golden.meta.get(LOSSES) or {}).values():
        entry = losses.get(key) if isinstance(losses, dict) else None
        terms = entry.get("terms") if isinstance(entry, dict) else None
        if isinstance(terms, dict) and terms.get("parts"):
            return [(str(t["tensor"]), float(t["coefficient"])) for t in terms["parts"]]
    return None


def loss_term(golden: Trace, key: str, first: int, losses: Mapping[int, Tuple[float, float]],
              resolve: Resolve) -> List[Fingerprint]:
    """The term whose factor explains the port's loss `key` (golden, port) at the steps of
    `losses` (those that started from the golden's state), `first` being the failing one; or,
    where no one term does, the two terms whose factors together do (at PAIR_STEPS steps at
    least). [] where none, or more than one, fits."""
    terms = terms_of(golden, key)
    if first not in losses:
        return []
    if terms is None:
        found = _tap_term(golden, key, first, losses, resolve)
        return [] if found is None else [found]
    name = split_key(key)[1]
    values: Dict[int, List[float]] = {}
    for step in losses:
        recorded = (golden.step(step).info.get("loss_terms") or {}).get(key)
        if isinstance(recorded, list) and len(recorded) == len(terms):
            values[step] = [float(v) for v in recorded]
    if first not in values:
        return []
    singles = [((index, factor),) for index in range(len(terms)) for factor in FACTORS]
    pairs = [((i, fi), (j, fj)) for i, j in itertools.combinations(range(len(terms)), 2)
             for fi in FACTORS for fj in FACTORS] if len(values) >= PAIR_STEPS else []
    for candidates in (singles, pairs):
        fits = []
        for changes in candidates:
            worst = _fits(losses, values, [(i, terms[i][1], f) for i, f in changes], first, resolve, name)
            if worst is not None:
                fits.append((changes, worst))
        if len(fits) > 1:
            return []  # more than one explanation: nothing is named
        if fits:
            changes, worst = fits[0]
            return [Fingerprint(LOSS_TERM, first, (key,), terms[i][1], terms[i][1] * f, worst,
                                {"term": i, "terms": len(terms), "factor": f, "steps": len(values), "tensor": terms[i][0],
                                 "part": make_key("loss", "%s%s%d" % (name, TERM, i)),
                                 **({"with": len(changes)} if len(changes) > 1 else {})})
                    for i, f in changes]
    return []


def _tap_term(golden: Trace, key: str, first: int, losses: Mapping[int, Tuple[float, float]],
              resolve: Resolve) -> Optional[Fingerprint]:
    """The one scalar tap whose value times one weight is the port's loss minus the golden's at
    every step of `losses`, `first` being the failing one."""
    steps = sorted(losses)
    taps: Dict[str, List[float]] = {}
    for step in steps:
        recorded = golden.step(step)
        for name in golden.names("tap"):
            value = recorded.get(make_key("tap", name)) if make_key("tap", name) in recorded else None
            array = np.asarray(value) if value is not None else None
            if array is not None and array.size == 1 and array.dtype.kind == "f":
                taps.setdefault(name, []).append(float(array.reshape(())))
    delta = np.array([losses[s][1] - losses[s][0] for s in steps])
    fits = []
    for name, values in taps.items():
        t = np.array(values)
        if len(t) != len(steps) or len(t) < ELEMENTS_PER_PARAMETER or np.ptp(t) <= EPS32 * np.max(np.abs(t)):
            continue  # absent at a step, too few steps, or one value: any weight fits
        weight = float(np.dot(delta, t) / np.dot(t, t))
        worst = 0.0
        for step, value in zip(steps, t):
            golden_loss, port = losses[step]
            predicted = golden_loss + weight * value
            stats = compare_values(np.float64(predicted), np.float64(port), resolve("loss", split_key(key)[1], step,
                                                                                       "float32"))
            if not stats.ok or (step == first and abs(predicted - port) > LEFT * abs(port - golden_loss)):
                break
            worst = max(worst, stats.ulps)
        else:
            fits.append((name, weight, worst))
    if len(fits) != 1:
        return None
    name, weight, worst = fits[0]
    return Fingerprint(LOSS_TAP, first, (key,), 0.0, weight, worst,
                       {"tap": name, "steps": len(steps), "part": make_key("tap", name)})


def source_key(hint: Fingerprint) -> Optional[str]:
    """The tensor whose source line a fingerprint shows: the part of the loss it names (the
    recorder keeps each part's line under its key), else the first tensor it explains."""
    part = hint.detail.get("part")
    return part if isinstance(part, str) else (hint.keys[0] if hint.keys else None)


def port_source_key(hint: Fingerprint) -> Optional[str]:
    """Where the port's line of that tensor is kept: a tap's under its own key, a recorded
    part's under its loss (the port's loss is one expression), else the first tensor's."""
    part = source_key(hint)
    return part if part is not None and split_key(part)[0] == "tap" else (hint.keys[0] if hint.keys else None)


def _fits(losses: Mapping[int, Tuple[float, float]], values: Mapping[int, List[float]],
          changes: List[Tuple[int, float, float]], first: int, resolve: Resolve, name: str) -> Optional[float]:
    """The ulps left where the factors on those terms ((index, coefficient, factor) each) predict
    the port's loss at every step, else None."""
    worst = 0.0
    for step, parts in values.items():
        golden, port = losses[step]
        predicted = golden + sum((factor - 1.0) * coefficient * parts[index] for index, coefficient, factor in changes)
        stats = compare_values(np.float64(predicted), np.float64(port), resolve("loss", name, step, "float32"))
        if not stats.ok or (step == first and abs(predicted - port) > LEFT * abs(port - golden)):
            return None
        worst = max(worst, stats.ulps)
    return worst
