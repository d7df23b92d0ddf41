"""Which of a step's random draws the golden keeps as their generator's key and counter rather
than their values (store/drawn.py): a seeded uniform draw whose values numpy makes again, bit
for bit, from the op's seeds and the counter its runs have reached. The claim is checked at
every step: a draw made here that is not the one fetched is kept as values, and that op's draws
are kept as values from then on (a run outside the steps moved its counter, say). Python 3.7
syntax.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..keys import split_key
from ..store.drawn import DTYPES, Drawn, matches, stride

# Runs of the op a step may find between it and the last (a run of the same op outside the
# steps), tried before its draws are kept as values.
SKIPPED_RUNS = 3


class Regenerated:
    """Per draw: the counter its next run starts from, or None where its values are kept."""

    def __init__(self) -> None:
        self._next: Dict[str, Optional[int]] = {}

    def kept(self, fetched: Mapping[str, Any], values: List[Tuple[str, Any]]) -> List[Tuple[str, Any]]:
        """`values` ("kind/name", value) with each draw numpy makes again as its Drawn; `fetched`:
        key -> the tensor the value was fetched from."""
        return [(key, self._drawn(key, fetched.get(key), value) or value) if split_key(key)[0] == "random"
                else (key, value) for key, value in values]

    def _drawn(self, key: str, tensor: Any, value: Any) -> Optional[Drawn]:
        start = self._next.get(key, 0)
        if start is None:
            return None
        seeds = _seeds(tensor, value)
        if seeds is None:
            self._next[key] = None
            return None
        step = stride(int(value.size))
        for skipped in range(SKIPPED_RUNS + 1):
            drawn = Drawn(seeds[0], seeds[1], start + skipped * step, tuple(value.shape), value.dtype.name)
            if matches(drawn, value):
                self._next[key] = drawn.offset + step
                return drawn
        self._next[key] = None
        return None


def _seeds(tensor: Any, value: Any) -> Optional[Tuple[int, int]]:
    """The (seed, seed2) of a stateful uniform draw TF made with them; None for any other (an
    unseeded op draws its key at random, which nothing records)."""
    op = getattr(tensor, "op", None)
    if op is None or op.type != "RandomUniform" or not isinstance(value, np.ndarray) or value.dtype.name not in DTYPES:
        return None
    seed, seed2 = int(op.get_attr("seed")), int(op.get_attr("seed2"))
    return None if seed == 0 and seed2 == 0 else (seed, seed2)
