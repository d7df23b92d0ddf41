"""Reading the golden's next step while the port runs the one before (replay/loop.py): a small
model's step is as short as reading its inputs, draws and forced state."""

from __future__ import annotations

import concurrent.futures
from typing import Callable, Optional, Tuple

from .._threads import pool
from ..store import Trace
from .micro import micro_batches, unstacked


class ReadAhead:
    """Reads a step's inputs, random draws, info and (where `forced(index)`) the state it starts
    from with the learning rates of the step before, from the golden on a thread of its own while
    the port runs the step before (a small model's step is as short as reading them). `wait`
    before anything that must not overlap a read: the golden's refresh, forced_record."""

    def __init__(self, golden: Trace, count: int, forced: Callable[[int], bool]) -> None:
        self._golden, self._count, self._forced = golden, count, forced
        self._pool = pool("read-ahead", 1)
        self._next: Optional[Tuple[int, "concurrent.futures.Future[tuple]"]] = None

    def _read(self, index: int) -> tuple:
        golden = self._golden
        g_step = golden.step(index)
        feeds = {name: g_step["input", name] for name in g_step.names("input")}
        draws = unstacked([(name, g_step["random", name]) for name in g_step.names("random")],
                          micro_batches(g_step.info))
        before = None
        if self._forced(index):
            state = golden.state_before(index)  # forcing needs the golden's full state after every step
            last = golden.step(index - 1)
            before = state, {name: float(last["lr", name]) for name in last.names("lr")}
        return g_step, feeds, draws, g_step.info, before

    def take(self, index: int) -> tuple:
        """Step `index`'s (golden step, feeds, draws, info, (state, rates) or None); starts reading
        the next one's."""
        found = self._next[1].result() if self._next is not None and self._next[0] == index else self._read(index)
        self._next = None
        if index + 1 < self._count:
            self._next = (index + 1, self._pool.submit(self._read, index + 1))
        return found

    def wait(self) -> None:
        if self._next is not None:
            concurrent.futures.wait([self._next[1]])

    def close(self) -> None:
        self._pool.shutdown(wait=True)
