"""The golden's random draws handed to a port in the order it draws them, framework-free: each
adapter's tape (tracekit/torch/tape.py, tracekit/jax/tape.py) replaces its framework's random
functions with ones that take their numbers from here.

TF1 drops out with a uniform draw: an element is kept where the draw is >= the rate, and scaled
by 1 / (1 - rate); `kept` says so once for every framework. A draw of another shape with as many
numbers is handed out reshaped; anything else is a ReplayError naming the step and the draw.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from ..errors import ReplayError


def kept(uniform: np.ndarray, rate: float) -> np.ndarray:
    """TF1's dropout mask from its uniform draw: kept where the draw >= the rate (in float32)."""
    return np.asarray(uniform) >= np.float32(rate)


class DrawTape:
    """One replay's draws; `framework` names the port's side in messages, `unfed` says which of
    its random functions draw their own numbers (not fed)."""

    def __init__(self, inject: bool, framework: str, fed: str, unfed: str) -> None:
        self.inject, self.framework, self.fed, self.unfed = inject, framework, fed, unfed
        self.taken: List[np.ndarray] = []  # this step's draws as the port took them
        self.rates: Dict[str, float] = {}  # golden draw -> the dropout rate it was used at
        self.reshaped: Dict[str, List[List[int]]] = {}
        self._tape: List[Tuple[str, np.ndarray]] = []
        self._step = -1

    def start(self, index: int, draws: List[Tuple[str, np.ndarray]]) -> None:
        self._tape, self.taken, self._step = list(draws), [], index

    def check(self, index: int) -> None:
        """After the step: the port must have drawn every recorded draw."""
        if self.inject and self._tape and len(self.taken) != len(self._tape):
            raise ReplayError("step %d: the %s step drew %d random tensors, the golden recorded %d (%s); the random "
                              "tape feeds them in order, so the port must draw as often (%s; %s draw their own, unfed)"
                              % (index, self.framework, len(self.taken), len(self._tape),
                                 ", ".join(n for n, _ in self._tape), self.fed, self.unfed))

    def next(self, what: str, shape: Tuple[int, ...], kind: str, rate: Optional[float] = None) -> np.ndarray:
        """The next recorded draw, for a `kind` ("uniform", "normal") draw of `shape` the port
        asks for by `what`; `rate`: the dropout rate it is used at."""
        position = len(self.taken)
        where = "step %d, random draw %d (%s)" % (self._step, position, what)
        if position >= len(self._tape):
            raise ReplayError("%s: the %s step draws more random tensors than the golden recorded (%d); use "
                              "random='none' if the port's randomness differs" % (where, self.framework, len(self._tape)))
        name, value = self._tape[position]
        drawn = distribution(name)
        if drawn is not None and drawn != kind:
            raise ReplayError("%s: the golden recorded a %s draw (%s), the %s step asks for a %s one; the tape "
                              "feeds draws in order" % (where, drawn, name, self.framework, kind))
        if tuple(value.shape) != shape and value.size == int(np.prod(shape)):
            self.reshaped.setdefault(name, [list(value.shape), list(shape)])
            value = value.reshape(shape)
        if tuple(value.shape) != shape:
            raise ReplayError("%s: the golden recorded %s %s from %s, the %s step asks for %s; the tape feeds draws "
                              "in order, so the port must draw as many numbers in the same order"
                              % (where, value.dtype, tuple(value.shape), name, self.framework, shape))
        self.taken.append(value)
        if rate is not None:
            self.rates.setdefault(name, rate)
        return value


def distribution(name: str) -> Optional[str]:
    """What a recorded draw's op name says it drew: "truncated", "normal", "uniform" or None."""
    lowered = name.rsplit("/", 1)[-1].lower()
    for kind in ("truncated", "normal", "uniform"):  # truncated first: its name holds "normal" too
        if kind in lowered:
            return kind
    return None
