"""What a recording's metadata says of the steps as they come: the kinds of step (the train ops
each run ran), the races, input structures and source lines each kind showed, and the inputs
fed in another dtype than the graph consumed. Each is said at once, so a recording killed later keeps it.
Python 3.7 syntax."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..keys import HELD
from ..sources import written


class Kinds:
    def __init__(self) -> None:
        self.train_ops: List[str] = []  # the kinds of steps seen: "op" or "op+op", the train ops a run ran
        self.races: List[Dict[str, str]] = []  # walk.unordered_reads of the steps seen
        self.structures: Dict[str, Any] = {}  # the steps' input structures (structure.py)
        self.fed_dtypes: Dict[str, str] = {}  # inputs fed in another dtype than the graph consumed
        self.sources: Dict[str, Any] = {}  # key -> the program's lines behind it (record/sources.py), first kind first
        self.held: Dict[str, Dict[str, int]] = {}  # kind -> what its steps record (store/held.py)

    def new(self, plan: Any, held: Optional[Dict[str, int]] = None) -> Optional[Dict[str, Any]]:
        """The metadata a step of a kind not seen yet adds (the kinds, and the races and input
        structures its plan shows; `held`: what it holds where that is not its plan's alone, its
        micro-batch runs'); None for a kind seen before."""
        kind = "+".join(plan.train_ops)
        if kind in self.train_ops:
            return None
        self.train_ops.append(kind)
        self.held[kind] = dict(plan.held if held is None else held)
        meta: Dict[str, Any] = {"train_ops": list(self.train_ops), HELD: dict(self.held)}
        if plan.races:
            self.races.extend(r for r in plan.races if r not in self.races)
            meta["races"] = list(self.races)
        if plan.structures:
            self.structures.update(plan.structures)
            meta["inputs"] = dict(self.structures)
        meta.update(self.new_sources(plan) or {})
        return meta

    def new_sources(self, plan: Any) -> Optional[Dict[str, Any]]:
        """The metadata the source lines of a plan not seen yet add (a micro-batch run's too)."""
        new_sources = {k: v for k, v in written(plan.sources).items() if k not in self.sources}
        if not new_sources:
            return None
        self.sources.update(new_sources)
        return {"sources": dict(self.sources)}

    def fed(self, name: str, dtype: Optional[str]) -> Optional[Dict[str, Any]]:
        """The metadata an input fed as `dtype` (None: as consumed) adds the first time; else None."""
        if dtype is None or name in self.fed_dtypes:
            return None
        self.fed_dtypes[name] = dtype
        return {"fed_dtypes": dict(self.fed_dtypes)}
