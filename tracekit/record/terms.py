"""The addends of a loss the recorder found (losses.loss_terms), as a step records them, where
the recording asked for them (loss_parts: fetching them may change how TensorFlow's graph
optimizer sums the loss, by an ulp).

Their values leave the step's fetches for its info ("loss_terms": loss key -> the values, in
order), so the golden gains no tensor a port would have to produce. At the first step of each
kind of run the sum of coefficient x value is held to the loss the step computed before the
golden's metadata claims them (meta["losses"][kind][loss key]["terms"]); where it fails, the
terms are dropped with a warning. A replay names a slip in one part of the loss from them
(comparison/fingerprints.py). numpy only; Python 3.7 syntax.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Set, Tuple

import numpy as np

# How closely the terms must sum to the loss, of their summed magnitude: the float32 round-off of a
# sum of a few scalars, with room.
SUM_RTOL = 1e-5

# loss key -> {"parts": [{"key", "tensor", "coefficient"}], "offset": the constant added} (StepPlan.terms)
Terms = Mapping[str, Dict[str, Any]]


def split(terms: Terms, values: List[Tuple[str, Any]]) -> Tuple[List[Tuple[str, Any]], Dict[str, List[float]]]:
    """The step's fetched values without the terms, and each loss's term values in order."""
    keys = {term["key"] for found in terms.values() for term in found["parts"]}
    if not keys:
        return values, {}
    got = {key: value for key, value in values if key in keys}
    found = {loss: [float(np.asarray(got[term["key"]]).reshape(())) for term in of["parts"]]
             for loss, of in terms.items() if all(term["key"] in got for term in of["parts"])}
    return [(key, value) for key, value in values if key not in keys], found


def check(terms: Terms, found: Mapping[str, List[float]],
          values: List[Tuple[str, Any]]) -> Tuple[Dict[str, Dict[str, Any]], List[str]]:
    """The terms that sum to their loss at this step (loss key -> the metadata's entry: "parts",
    each {"tensor", "coefficient"}, and "offset"), and a warning for each loss whose terms do not."""
    losses = dict(values)
    kept: Dict[str, Dict[str, Any]] = {}
    warnings = []
    for loss, of in terms.items():
        parts = of["parts"]
        got, total = found.get(loss), losses.get(loss)
        if got is None or total is None:
            continue
        addends = [term["coefficient"] * value for term, value in zip(parts, got)] + [of["offset"]]
        summed, total = float(np.sum(addends)), float(np.asarray(total).reshape(()))
        if abs(summed - total) <= SUM_RTOL * max(float(np.sum(np.abs(addends))), abs(total), 1e-30):
            kept[loss] = {"parts": [{"tensor": term["tensor"], "coefficient": term["coefficient"]} for term in parts],
                          "offset": of["offset"]}
        else:
            warnings.append("the parts found of %s (%s) sum to %r, not to the loss's %r: they are not kept, and a "
                            "slip in one of them is not named" % (
                                loss, " + ".join("%g x %s" % (t["coefficient"], t["tensor"]) for t in parts),
                                summed, total))
    return kept, warnings


class Kept:
    """Per kind of step, the losses whose parts summed to them at its first step: the only ones
    the metadata claims and each step's info keeps."""

    def __init__(self) -> None:
        self._losses: Dict[str, Set[str]] = {}

    def claim(self, kind: str, plan: Any, found: Mapping[str, List[float]], values: List[Tuple[str, Any]]) -> List[str]:
        """At the first step of `kind`: the parts checked (`check`) go into plan.losses[key]["terms"]
        where they sum to the loss; the warnings for those that do not."""
        kept, warnings = check(plan.terms, found, values)
        for loss, entry in plan.losses.items():
            entry.pop("terms", None)
            if loss in kept:
                entry["terms"] = kept[loss]
        self._losses[kind] = set(kept)
        return warnings

    def info(self, kind: str, found: Mapping[str, List[float]]) -> Dict[str, Any]:
        """What a step of `kind` adds to its info: {"loss_terms": ...}, or nothing."""
        parts = {loss: values for loss, values in found.items() if loss in self._losses.get(kind, ())}
        return {"loss_terms": parts} if parts else {}
