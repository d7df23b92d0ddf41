"""OrderedIO: one thread running file writes in the order they were submitted.

The writer hands it chunk payloads for the golden and records for the journal, so
the kernel's copying of the bulk data overlaps compression and HDF5's
bookkeeping, while order (a step's chunks, then its commit record) is kept.
`submit` never blocks: it is called inside HDF5 calls, holding h5py's lock, where
waiting for another thread could deadlock. `drain` must only be called outside
HDF5 calls.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Optional

from .._threads import start_thread


class OrderedIO:
    def __init__(self) -> None:
        self._queue: Any = queue.SimpleQueue()  # lock-free put
        self.error: Optional[BaseException] = None  # the first failure; later calls are skipped
        self._thread = start_thread("io", self._run)

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        self._queue.put((fn, args))

    def drain(self) -> None:
        """Wait until everything submitted so far has run; raise the first failure."""
        done = threading.Event()
        self._queue.put(done)
        done.wait()
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        try:
            self.drain()
        finally:
            self._queue.put(None)
            self._thread.join()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, threading.Event):
                item.set()
            elif self.error is None:
                try:
                    item[0](*item[1])
                except BaseException as exc:  # reported by drain() and the writer's checks
                    self.error = exc
