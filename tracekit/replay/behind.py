"""A sink run on a thread of its own, behind the replay (a comparison fed as the port runs)."""

from __future__ import annotations

import queue
from typing import Any, Callable, Mapping, Optional, Tuple

from .._threads import start_thread
from .loop import Sink


class Behind:
    """A sink run on a thread of its own, at most `depth` steps behind the replay, so its work
    (a comparison's reading of the golden and statistics) overlaps the port's next steps. Every
    `sync_every` steps it catches up and `sync` runs on the replay's thread (the golden's
    refresh, which no read may overlap). Its errors surface at the next step or at close()."""

    def __init__(self, sink: Sink, depth: int = 2, sync: Optional[Callable[[], None]] = None,
                 sync_every: int = 0) -> None:
        self.sink = sink
        self.takes_initial = sink.takes_initial
        self._sync, self._sync_every = sync, sync_every
        self._queue: "queue.Queue[Optional[Tuple[str, tuple]]]" = queue.Queue(maxsize=max(1, depth))
        self._error: Optional[BaseException] = None
        self._drop = False
        self._thread = start_thread("behind", self._run)

    def initial(self, values: Mapping[str, Any]) -> None:
        self._put(("initial", (values,)))

    def step(self, index: int, values: Mapping[str, Any], reasons: Mapping[str, str],
             fed: Mapping[str, Any]) -> None:
        self._put(("step", (index, values, reasons, fed)))
        if self._sync is not None and self._sync_every and (index + 1) % self._sync_every == 0:
            self._queue.join()
            self._sync()

    def close(self, quiet: bool = False) -> None:
        """Wait for the sink to finish the steps handed to it; raise what it raised, unless quiet."""
        if quiet:
            self._drop = True  # the replay failed: what is still queued no longer matters
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if quiet:
            self._error = None
        self._raise()

    def _put(self, item: Tuple[str, tuple]) -> None:
        self._raise()
        self._queue.put(item)

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._error is None and not self._drop:  # after a failure the steps queued are dropped
                    getattr(self.sink, item[0])(*item[1])
            except BaseException as exc:  # handed to the replay's thread
                self._error = exc
            finally:
                self._queue.task_done()
