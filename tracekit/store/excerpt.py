"""A one-step excerpt of a golden: the state before step k as its initial state, and step k
(inputs, random draws, taps, loss, learning rate, gradients, state after). Replayed from its
initial state, a port runs exactly the golden's step k: a reproduction of one step's
divergence that replays in seconds."""

from __future__ import annotations

import copy
from typing import Optional

from ..errors import UsageError
from ..keys import split_key
from .reader import Trace
from .writer import create


def write_excerpt(golden: Trace, step: int, out: str, source: Optional[Trace] = None) -> str:
    """Write step `step` of `golden` as a golden of one step at `out`; returns `out`. Its
    metadata is the golden's (environment, seeds, provenance) plus "excerpt": {"of", "step"}.
    source: a replay of the golden whose state before the step and values at it are taken
    instead (its inputs and random draws are the golden's): that run's step as a golden."""
    if not 0 <= step < len(golden):
        raise UsageError("%s has steps 0..%d: no step %d to excerpt" % (golden.path, len(golden) - 1, step))
    taken = golden if source is None else source
    state = taken.state_view(step)  # read one value at a time: a whole state is gigabytes
    meta = copy.deepcopy(dict(golden.meta))
    meta["excerpt"] = {"of": golden.path, "step": step}
    if source is not None:
        meta["excerpt"]["values_of"] = source.path
    values = taken.step(step)
    info = dict((values if source is None else golden.step(step)).info)  # a replay's step info is its own
    with create(out, meta=meta) as writer:
        with writer.initial():
            for key, value in state.items():  # values read here, which nothing else holds: not copied
                writer.add(*split_key(key), value=value, copy=False)
        with writer.step(info):
            for key in values:
                writer.add(*split_key(key), value=values[key], copy=False)
    return out
