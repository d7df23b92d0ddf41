"""Format 2's blocks of steps in a finished golden (docs/FORMAT.md, "Steps"): which block holds
a step, checked to cover the steps in order, and each block decoded once and kept for the steps
after it (a replay reads step after step)."""

from __future__ import annotations

import bisect
import collections
from typing import Any, Callable, Dict, List, Tuple

from .. import _metadata
from .._format import ATTR_BLOCK_STEPS, BLOCKS_GROUP, block_path

KEPT = 2  # blocks kept decoded: the one a replay reads ahead in, and the one it compares

Entry = Tuple[bytes, bytes]  # a step's info and index blobs


class Blocks:
    def __init__(self, file: Any) -> None:
        """The blocks `file` holds; ValueError if they leave out a step or hold one twice."""
        group = file.get(BLOCKS_GROUP)
        self.firsts: List[int] = sorted(int(name) for name in group.keys()) if group is not None else []
        self.held: Dict[int, int] = {}
        self.steps = 0
        for first in self.firsts:
            if first != self.steps:
                raise ValueError("the blocks of steps leave out steps %d to %d" % (self.steps, first - 1)
                                 if first > self.steps else "two blocks of steps hold step %d" % first)
            held = int(file[block_path(first)].attrs[ATTR_BLOCK_STEPS])
            if held < 1:
                raise ValueError("the block of steps at step %d holds %d steps" % (first, held))
            self.held[first] = held
            self.steps += held
        # safe across reader threads: OrderedDict's popitem evicts in one call
        self._decoded: "collections.OrderedDict[int, Dict[int, Entry]]" = collections.OrderedDict()

    def entry(self, step: int, read: Callable[[int], bytes]) -> Entry:
        """`step`'s info and index; `read(first)` gives the checked bytes of the block at `first`."""
        first = self.firsts[bisect.bisect_right(self.firsts, step) - 1]
        found = self._decoded.get(first)
        if found is None:
            found = self._decode(first, read(first))
            self._decoded[first] = found
            while len(self._decoded) > KEPT:
                try:
                    self._decoded.popitem(last=False)
                except KeyError:  # another thread emptied it meanwhile
                    break
        return found[step]

    def _decode(self, first: int, data: bytes) -> Dict[int, Entry]:
        entries = _metadata.unpack(data)
        held = self.held[first]
        if not isinstance(entries, list) or [e[0] if isinstance(e, list) and len(e) == 3 else None
                                             for e in entries] != list(range(first, first + held)) \
                or not all(isinstance(e[1], bytes) and isinstance(e[2], bytes) for e in entries):
            raise ValueError("the block of steps at step %d does not list steps %d to %d, each [step, info, index]"
                             % (first, first, first + held - 1))
        return {e[0]: (e[1], e[2]) for e in entries}
