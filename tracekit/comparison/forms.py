"""The forms of update fingerprints.py tries where no change of a few usual parameters (a
factor, a decay, Adam's epsilon or bias correction) explains a failing tensor: a gradient
clipped by value, Adam's epsilon on the other side of the square root, Momentum's
conventions, an L2 term inside Adam, a kernel transposed or its blocks permuted; the first that
explains it is named.
numpy only; Python 3.7 syntax.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..keys import split_key
from ..store import Trace
from . import adam_l2, clipping, epsilon, momentum, permuted
from .explained import Explained
from .tolerance import Resolved

Moments = Tuple[np.ndarray, np.ndarray, Tuple[float, float]]  # adam.moments: m, v after the step, betas


def first(found: Optional[Explained]) -> List[Explained]:
    return [] if found is None else [found]


def gradient(key: str, g_value: Any, a_value: Any, tol: Resolved, shaped: bool = True) -> List[Explained]:
    """A gradient as the golden's clipped by value (or the golden's as the port's clipped), or
    transposed or permuted (`shaped`: the values are the tensors, not a digest's sample)."""
    clipped = clipping.by_value(key, g_value, a_value, tol)
    if clipped is not None or not shaped:
        return first(clipped)
    return first(permuted.fit(key, None, g_value, a_value, tol))


def variable(golden: Trace, key: str, start: Any, g_value: Any, a_value: Any, tol: Resolved,
              before: Mapping[str, Any], recorded: Mapping[str, Any], moments: Optional[Moments],
              epsilons: Sequence[float], counts: Sequence[int] = (), shaped: bool = True) -> List[Explained]:
    """A variable's update as Adam's with its epsilon on the other side of the square root or
    with an L2 term added to its gradient inside (its moments verified; `counts`: the step counts
    a bias correction may have used), as another of Momentum's conventions (its accumulator verified), or as
    the golden's transposed or permuted (only `shaped` values: a sample has no axes); `epsilons`:
    the usual epsilons."""
    if moments is not None:
        inside = epsilon.fit(key, start, g_value, a_value, tol, moments[0], moments[1], epsilons)
        if inside is not None:
            return [inside]
        l2 = adam_l2.fit(key, start, g_value, a_value, tol, recorded, moments, counts, epsilons)
        if l2 is not None:
            return [l2]
    else:
        acc = momentum.accumulator(golden, split_key(key)[1], before, recorded)
        named = [] if acc is None else momentum.fit(key, start, g_value, a_value, tol, acc)
        if named:
            return named
    return first(permuted.fit(key, start, g_value, a_value, tol)) if shaped else []
