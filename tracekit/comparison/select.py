"""Which part of a comparison a report shows: tensors by kind and name, steps by range.

A selection narrows what is shown (the per-tensor table, the JSON's tensors, their worst
steps), never the comparison itself: the verdict and the first divergence stay those of
everything compared, and a report says that it shows a part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

from ..errors import UsageError
from .stats import Stats, badness
from .tolerance import Rule

Steps = Tuple[Optional[int], Optional[int]]  # [start, stop), None open


def parse_steps(text: str) -> Steps:
    """"5" (step 5 alone), "3:10" (steps 3 to 9), "3:" or ":10"; "initial" or -1: the initial state."""
    def number(part: str) -> Optional[int]:
        part = part.strip()
        if not part:
            return None
        if part == "initial":
            return -1
        try:
            return int(part)
        except ValueError:
            raise UsageError("bad step %r in --step %r: use N, START:STOP, START: or :STOP" % (part, text)) from None
    if ":" in text:
        start, _, stop = text.partition(":")
        return number(start), number(stop)
    step = number(text)
    return (step, None if step is None else step + 1)


@dataclass(frozen=True)
class Selection:
    """Tensors of `kinds` (all when empty) whose name matches `name` (a glob, or "re:<regex>";
    all when None), at `steps`. Tensors are result.py's TensorResults (Any here: result.py
    imports this module)."""

    kinds: Tuple[str, ...] = ()
    name: Optional[str] = None
    steps: Optional[Steps] = None

    def __post_init__(self) -> None:
        # The tolerance rules' matching (kind names, globs, regexes, step ranges), one rule per kind.
        rules = [Rule(kind, self.name, self.steps) for kind in self.kinds] or [Rule(None, self.name, self.steps)]
        object.__setattr__(self, "_rules", rules)

    @property
    def everything(self) -> bool:
        return not self.kinds and self.name is None and self.steps is None

    def steps_of(self, tensor: Any) -> List[int]:
        """The tensor's compared steps this selection shows (none: the tensor is not shown)."""
        rules: List[Rule] = getattr(self, "_rules")
        return [step for step in tensor.by_step if any(r.matches(tensor.kind, tensor.name, step) for r in rules)]

    def worst(self, tensor: Any, steps: List[int]) -> Tuple[Optional[int], Optional[Stats]]:
        """The worst of these steps of the tensor, and its statistics."""
        if not steps:
            return None, None
        step = max(steps, key=lambda s: badness(tensor.by_step[s]))
        return step, tensor.by_step[step]

    def describe(self) -> str:
        parts = (["kind %s" % "/".join(self.kinds)] if self.kinds else []) + \
                (["name %s" % self.name] if self.name is not None else [])
        if self.steps is not None:
            start, stop = self.steps
            parts.append("step %s" % start if stop is not None and start is not None and stop == start + 1 else
                         "steps %s:%s" % ("" if start is None else start, "" if stop is None else stop))
        return ", ".join(parts) or "everything"
