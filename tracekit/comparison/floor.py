"""Slots that agree only because the absolute tolerance exceeds their scale.

A float32 tolerance's atol (1e-5) is larger than the whole of some optimizer slots: Adam's v of
a small gradient is 1e-7. Such a slot passes whatever its values; a port that computes it
otherwise (Keras 3's per-row sparse update) is then seen only where the variables depart. The
comparison says so for each slot whose error, up to the first divergence, is FLOOR_ULPS or more
of its own scale while it passes.
"""

from __future__ import annotations

from typing import List, Optional

from ..keys import step_label
from .result import TensorResult

# A slot that passes only under the absolute tolerance, its error this many ulps of its own scale
# (eps * its largest |golden|) or more, is said: Adam's v of a small gradient lies wholly under atol.
FLOOR_ULPS = 1e4


def under_the_floor(tensors: List[TensorResult], until: Optional[int]) -> List[str]:
    """Notes on the slots that agree, up to step `until` (the first divergence's; None: every
    step), only because the absolute tolerance exceeds their scale."""
    notes = []
    for t in tensors:
        if t.kind != "slot" or t.driven_by_noise:
            continue
        steps = [(t.by_step[k], k) for k in t.by_step if until is None or k <= until]
        passing = [(s.ulps, k, s) for s, k in steps if s.ok and not s.discrete and s.max_abs > 0]
        if not passing:
            continue
        ulps, step, worst = max(passing, key=lambda p: p[0])
        if ulps >= FLOOR_ULPS:
            notes.append("%s passes under the absolute tolerance (atol %.3g) but differs by up to %.3g ulps of its "
                         "own scale (its largest value %.3g) at %s: the floor hides the difference; a rule with "
                         "ulps= (or a smaller atol) on it holds the slot to its scale" % (
                             t.key, worst.atol, ulps, worst.golden_scale, step_label(step)))
    return notes
