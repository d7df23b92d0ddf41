"""A difference proportional to the state a step started from, on (nearly) every element: the
signature of a weight decay one side applies, which one step keeps within any tolerance. The
comparer fails a variable that passed its tolerance where it holds (held_to_proportion)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .fitting import ELEMENTS_PER_PARAMETER, LEFT, f64
from .sampled import cut, samples
from .stats import Stats
from .tolerance import Resolved

# A difference proportional to the value is a departure from this many ulps of its scale: two roundings
# of half an ulp stay under it, and a decay at BERT's rate (lr 5e-5 x 0.01: about 4 ulps a step) is over it.
PROPORTIONAL_ULPS = 2.0
EXPLAINED = 0.9  # ... where the proportion explains this fraction of the difference's energy


def proportional(golden: Any, actual: Any, start: Any, eps: float) -> Optional[float]:
    """c where the port's value minus the golden's is -c x the state the step started from, on
    (nearly) every element and far beyond round-off: the signature of a weight decay one side
    applies, which one step keeps within any tolerance (lr x decay: 1e-5 of the value for
    BERT's 1e-3 and 0.01). Round-off is not proportional to the state: its signs go either way,
    and a scalar rounded otherwise (a learning rate) scales the move, not the state. None where
    the difference is otherwise."""
    g, a, w = f64(golden), f64(actual), f64(start)
    if g.size < 4 * ELEMENTS_PER_PARAMETER or not (a.shape == g.shape == w.shape) or \
            not (np.all(np.isfinite(g)) and np.all(np.isfinite(a)) and np.all(np.isfinite(w))):
        return None
    d = a - g
    largest, scale = float(np.max(np.abs(d))), float(np.max(np.abs(g)))
    energy = float(np.dot(w, w))
    if largest < PROPORTIONAL_ULPS * eps * scale or energy == 0:
        return None
    c = -float(np.dot(d, w)) / energy
    left = d + c * w
    explained = 1 - float(np.dot(left, left)) / float(np.dot(d, d))
    return c if float(np.max(np.abs(left))) <= LEFT * largest and explained >= EXPLAINED else None


def held_to_proportion(stats: Stats, g_value: Any, a_value: Any, start: Any, tol: Resolved) -> None:
    """Fail a variable that passed its tolerance where its step, taken from the golden's state,
    moved it by a fixed proportion of its value on every element (proportional):
    a weight decay one side applies, which no single step's tolerance sees. Two digests: on
    their sampled elements, `start` cut to them (sampled.py)."""
    pair = samples(g_value, a_value)
    sampled = pair is not None
    if pair is not None:
        g_value, a_value, start = pair[0], pair[1], cut(start, g_value.count)
    c = proportional(g_value, a_value, start, tol.eps)
    if c is None:
        return
    every = "every sampled element" if sampled else "every element"
    stats.ok = False
    if not sampled:
        stats.mismatched = int(np.count_nonzero(np.asarray(g_value) != np.asarray(a_value)))
    stats.problem = ("%s is within the tolerance, but the port's value differs from the golden's by %.3g x the value "
                     "the step started from, on %s: not round-off, whose signs go either way, but a weight decay "
                     "one side applies" % (every[0].upper() + every[1:], -c, every))
