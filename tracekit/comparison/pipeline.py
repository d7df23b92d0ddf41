"""Work taken in the order it was put, run ahead on worker threads.

A comparison puts one call per tensor (read both sides, then their statistics) and takes
the results in data-flow order. Decoding (zstd, unshuffle, checksum) and numpy's
statistics release the GIL for most of their time, so the calls of several tensors run on
separate cores while the caller judges earlier ones. The queue runs across steps: while
the caller judges a step, the next step's first tensors are already being read, so no
core idles at a step's end. At most `ahead` calls are started and not yet taken, and no
more of them than their stated bytes allow (`budget`; one call always may): memory stays a few
values, whatever the trace's length and however large its tensors.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
from typing import Any, Callable, Deque, List, Optional

from .._threads import pool

WORKERS = min(4, os.cpu_count() or 1)


class Pipeline:
    """`put(call, background)` ... `take()` returns call() of the oldest call not yet taken.
    A background call starts on a worker once it is among the `ahead` oldest; any other call
    (a small one: a thread hand-off would cost more) runs when it is taken. Serial with one worker."""

    def __init__(self, workers: Optional[int] = None, ahead: int = 8, budget: Optional[int] = None) -> None:
        self.ahead = max(1, ahead)
        self.budget = budget  # bytes the started calls may hold at once (None: no limit)
        self._queue: Deque[List[Any]] = collections.deque()  # [call, background, future or None, bytes]
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
        workers = WORKERS if workers is None else workers
        if workers > 1:
            self._pool = pool("compare", workers)

    def put(self, call: Callable[[], Any], background: bool, size: int = 0) -> None:
        """Queue `call`; `size`: about the bytes its result holds (for the budget)."""
        self._queue.append([call, background and self._pool is not None, None, size])
        self._start()

    def take(self) -> Any:
        if not self._queue:
            raise IndexError("take() from an empty pipeline")
        call, _, future, _ = self._queue.popleft()
        self._start()  # the next call starts before this one is waited for
        return call() if future is None else future.result()

    def _start(self) -> None:
        held = 0  # the bytes of the calls started ahead and not taken
        for i, entry in enumerate(self._queue):
            if i >= self.ahead:
                break
            if entry[1] and entry[2] is None:
                if held and self.budget is not None and held + entry[3] > self.budget:
                    break  # in order: a later call waits too
                entry[2] = self._pool.submit(entry[0])  # type: ignore[union-attr]  # background: a pool
            if entry[2] is not None:
                held += entry[3]

    def cancel(self) -> None:
        """Forget the calls not taken (the caller stopped early, or a call failed)."""
        for _, _, future, _ in self._queue:
            if future is not None:
                future.cancel()
        self._queue.clear()

    def close(self) -> None:
        self.cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
