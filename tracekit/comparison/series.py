"""One tensor's statistics over the steps compared, stored compactly.

A comparison keeps every tensor's statistics at every step (reports plot them). As Stats
objects that costs ~500 bytes a tensor and step, most of it Python's per-object overhead,
and a long comparison's memory grows with it (a 10,000-step run of 300 tensors: 1.5 GB).
Here the numbers live in flat arrays, ~130 bytes a tensor and step; a Stats is made when
asked for.
"""

from __future__ import annotations

import array
import bisect
from typing import Dict, Iterator, Mapping

from .stats import Stats

_FLOATS = ("max_abs", "max_rel", "needed_atol", "needed_rtol", "golden_scale", "atol", "rtol", "ulps", "allowed_ulps",
           "moments")
_INTS = ("total", "mismatched", "nonfinite")
_ROW_INTS = 2 + len(_INTS) + 2  # ok, discrete, _INTS, the worst index's start and length


class StatsSeries(Mapping[int, Stats]):
    """step -> Stats, in step order; `append` adds the next step's."""

    def __init__(self) -> None:
        self._steps = array.array("q")
        self._floats = array.array("d")  # len(_FLOATS) a step
        self._ints = array.array("q")  # _ROW_INTS a step (the worst index's start is -1 for none)
        self._worst = array.array("q")  # the worst indices' elements, back to back
        self._problems: Dict[int, str] = {}  # row -> problem, for the few that have one
        self._bases: Dict[int, str] = {}  # row -> basis, for the rows judged from a digest

    def append(self, step: int, stats: Stats) -> None:
        if self._steps and step <= self._steps[-1]:
            raise ValueError("step %d after step %d: steps are added in order" % (step, self._steps[-1]))
        row = len(self._steps)
        self._steps.append(step)
        self._floats.extend(getattr(stats, name) for name in _FLOATS)
        self._ints.extend((int(stats.ok), int(stats.discrete)))
        self._ints.extend(getattr(stats, name) for name in _INTS)
        if stats.worst_index is None:
            self._ints.extend((-1, 0))
        else:
            self._ints.extend((len(self._worst), len(stats.worst_index)))
            self._worst.extend(stats.worst_index)
        if stats.problem is not None:
            self._problems[row] = stats.problem
        if stats.basis != "full":
            self._bases[row] = stats.basis

    def _row(self, step: int) -> int:
        row = bisect.bisect_left(self._steps, step)
        if row == len(self._steps) or self._steps[row] != step:
            raise KeyError(step)
        return row

    def __getitem__(self, step: int) -> Stats:
        row = self._row(step)
        stats = Stats()
        nf = len(_FLOATS)
        for name, value in zip(_FLOATS, self._floats[row * nf:(row + 1) * nf]):
            setattr(stats, name, value)
        ints = self._ints[row * _ROW_INTS:(row + 1) * _ROW_INTS]
        stats.ok, stats.discrete = bool(ints[0]), bool(ints[1])
        for name, value in zip(_INTS, ints[2:]):
            setattr(stats, name, value)
        start, ndim = ints[-2], ints[-1]
        stats.worst_index = None if start < 0 else tuple(self._worst[start:start + ndim])
        stats.problem = self._problems.get(row)
        stats.basis = self._bases.get(row, "full")
        return stats

    def __contains__(self, step: object) -> bool:
        try:
            self._row(step)  # type: ignore[arg-type]
        except (KeyError, TypeError):
            return False
        return True

    def __iter__(self) -> Iterator[int]:
        return iter(self._steps)

    def __len__(self) -> int:
        return len(self._steps)

    @property
    def nbytes(self) -> int:
        """The bytes these statistics take (their arrays; the few problem texts left out)."""
        return sum(a.itemsize * len(a) for a in (self._steps, self._floats, self._ints, self._worst))

    def __repr__(self) -> str:
        return "<StatsSeries: %d steps>" % len(self)
