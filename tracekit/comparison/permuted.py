"""A kernel laid out otherwise: the port's move of a variable (or its gradient) is the golden's
transposed (a square kernel, its last two axes swapped), or the golden's with the blocks of
its last axis in another order (an LSTM's four gate blocks: TF1's LSTMCell orders them
i, j, f, o, Keras' LSTM i, f, c, o; a GRU's three). Every order of BLOCKS blocks is tried, and
one is named only where it alone predicts the port's value within the tolerance, leaving at
most a quarter of the difference (fitting.explains). numpy only; Python 3.7 syntax.
"""

from __future__ import annotations

import itertools
from typing import Any, List, Optional, Tuple

import numpy as np

from .explained import Explained, largest
from .fitting import ELEMENTS_PER_PARAMETER, LEFT, explains
from .tolerance import Resolved

TRANSPOSED = "transposed"
PERMUTED = "permuted-blocks"
BLOCKS = (3, 4)  # a GRU's gates, an LSTM's
ROWS = 1024  # rows (all but the last axis) an order is first tried on: one failing there fails on all


def fit(key: str, start: Any, g_value: Any, a_value: Any, tol: Resolved) -> Optional[Explained]:
    """The port's move (a gradient's value, where `start` is None) as the golden's transposed or
    its last axis's blocks permuted."""
    g, a = np.asarray(g_value, np.float64), np.asarray(a_value, np.float64)
    w = np.zeros_like(g) if start is None else np.asarray(start, np.float64).reshape(g.shape)
    move = g - w
    if g.shape != a.shape or g.ndim < 1 or not (np.all(np.isfinite(move)) and np.all(np.isfinite(a))):
        return None
    before = largest(g, a)
    if g.ndim >= 2 and g.shape[-1] == g.shape[-2] and g.shape[-1] > 1:
        ulps = explains(w + np.swapaxes(move, -1, -2), a, before, tol)
        if ulps is not None:
            return Explained(key, TRANSPOSED, 0.0, 1.0, ulps)
    found: List[Tuple[Tuple[int, ...], float]] = []
    rows = slice(None, None, max(1, (g.size // g.shape[-1]) // ROWS))
    few = (w.reshape(-1, g.shape[-1])[rows], move.reshape(-1, g.shape[-1])[rows], a.reshape(-1, g.shape[-1])[rows])
    for blocks in BLOCKS:
        for order in orders(g.shape[-1], blocks, g.size):
            if largest(few[0] + permute(few[1], order), few[2]) > LEFT * before:
                continue
            ulps = explains(w + permute(move, order), a, before, tol)
            if ulps is not None:
                found.append((order, ulps))
    if len(found) != 1:  # none, or blocks alike enough that the order is not told
        return None
    order, ulps = found[0]
    return Explained(key, PERMUTED, float(len(order)), float(len(order)), ulps,
                     {"order": ", ".join(str(i) for i in order)})


def orders(size: int, blocks: int, elements: int) -> List[Tuple[int, ...]]:
    """Every order of `blocks` blocks of a last axis of `size` but the identity; none where the
    axis does not split so, or a block holds under ELEMENTS_PER_PARAMETER elements."""
    if size % blocks or size < 2 * blocks or elements // blocks < ELEMENTS_PER_PARAMETER:
        return []
    return [p for p in itertools.permutations(range(blocks)) if p != tuple(range(blocks))]


def permute(value: np.ndarray, order: Tuple[int, ...]) -> np.ndarray:
    """`value` with block j of its last axis the block order[j] of the input."""
    shape = value.shape
    split = value.reshape(shape[:-1] + (len(order), shape[-1] // len(order)))
    return np.take(split, list(order), axis=-2).reshape(shape)
