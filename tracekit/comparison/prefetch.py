"""Reading the values to compare ahead, on worker threads, while the caller compares.

Decoding a value (zstd, unshuffle, checksum) and the statistics of the one before it
release the GIL for most of their time, so a golden's value, the replay's and the
statistics proceed on separate cores. At most `ahead` values are read and not yet
taken: memory stays a few values, whatever the trace's length.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
from typing import Any, Callable, Deque, Iterable, Iterator, Optional, Tuple

WORKERS = min(4, os.cpu_count() or 1)


def _result(item: Any) -> Any:
    return item.result() if isinstance(item, concurrent.futures.Future) else item()


class Prefetch:
    """`with Prefetch() as reads: for value in reads.map(calls): ...`; serial with one worker."""

    def __init__(self, workers: Optional[int] = None, ahead: int = 8) -> None:
        self.ahead = max(1, ahead)
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
        workers = WORKERS if workers is None else workers
        if workers > 1:
            self._pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="tracekit-read")

    def map(self, calls: Iterable[Tuple[Callable[[], Any], bool]]) -> Iterator[Any]:
        """call() of each (call, ahead) pair, in order; read ahead on a worker when `ahead` (a big
        value), else when its turn comes (a small one: a thread hand-off would cost more)."""
        if self._pool is None:
            for call, _ in calls:
                yield call()
            return
        pending: Deque[Any] = collections.deque()  # futures, and the calls left to the turn
        try:
            for call, ahead in calls:
                pending.append(self._pool.submit(call) if ahead else call)
                if len(pending) >= self.ahead:
                    yield _result(pending.popleft())
            while pending:
                yield _result(pending.popleft())
        finally:
            for future in pending:  # the caller stopped early, or a read failed
                if isinstance(future, concurrent.futures.Future):
                    future.cancel()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def __enter__(self) -> "Prefetch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
