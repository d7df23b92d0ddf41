"""A source trace for a run without a golden: the port's own initial state and the batches it
is given, in the golden layout, so the replay loop can drive a TF2 step through them and
record everything a replay records (what a derived golden is made from)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence, Tuple

import numpy as np

from ..errors import UsageError
from ..store import create


def write_source(path: str, state: Sequence[Tuple[str, np.ndarray]], batches: Iterable[Mapping[str, Any]]) -> int:
    """Write the source trace; returns its number of steps. `state`: (variable name, value);
    `batches`: one {input name: array} per step."""
    names = [name for name, _ in state]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError("several TF2 variables are named %s: give the layers distinct names (the variables are "
                         "recorded by name)" % ", ".join(twice))
    steps = 0
    with create(path, meta={"user": {"source": "data given to a TF2 run"}}) as writer:
        with writer.initial():
            for name, value in state:
                writer.add("var", name, value)
        for index, batch in enumerate(batches):
            if not isinstance(batch, Mapping) or not batch:
                raise UsageError("data[%d] is a %s: each step's data is a dict {input name: array}, as the step "
                                 "function receives it" % (index, type(batch).__name__))
            with writer.step():
                for name, value in batch.items():
                    writer.add("input", str(name), np.asarray(value))
            steps += 1
    if not steps:
        raise UsageError("no data: give one dict {input name: array} per step to run")
    return steps
