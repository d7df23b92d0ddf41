"""tracekit's threads, all started here and named for their role, so that a thread dump (or
py-spy) says whose each one is: `tracekit-<role>`, and `tracekit-<role>_<n>` in a pool. Each
owner joins its thread, or shuts down its pool, when it closes; a lone thread is a daemon so
that an owner dropped unclosed never keeps the process alive (a pool's workers are joined at
exit, as concurrent.futures does). Python 3.7 syntax (the recorder's store uses them)."""

import concurrent.futures
import threading
from typing import Any, Callable

PREFIX = "tracekit-"


def start_thread(role: str, target: Callable[[], Any]) -> threading.Thread:
    """A started daemon thread running target()."""
    thread = threading.Thread(target=target, name=PREFIX + role, daemon=True)
    thread.start()
    return thread


def pool(role: str, workers: int) -> concurrent.futures.ThreadPoolExecutor:
    """A pool of up to `workers` threads."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=PREFIX + role)
