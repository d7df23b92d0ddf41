"""One recording per golden path: the journal beside it is the lock.

A writer holds an exclusive `flock` on its journal for as long as it records, and the
kernel drops that lock when the process ends, however it ends. So a journal whose lock
can be taken belongs to a recording that is over (killed or crashed: `tracekit recover`),
and one whose lock cannot be taken is being written right now. The journal is made under
a temporary name, locked and filled with its first record, then linked to its name: it
never appears unlocked or empty, and two writers starting together cannot both make it.

Where `flock` does not exist (Windows) the journal is still created exclusively, but
whether its writer is alive cannot be told: it counts as interrupted.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from typing import Optional

try:
    import fcntl
except ImportError:  # pragma: no cover  # Windows
    fcntl = None  # type: ignore[assignment]

# How long to retry a lock that readers hold for an instant (held() takes a shared lock). An
# exclusive lock is a live writer's or recovery's: never waited out, or a second writer would
# go on once the first finished and then replace its golden (test_writer_races.py).
BRIEF = 0.25


def create_locked(path: str, content: bytes) -> int:
    """Create `path` holding `content`, locked; returns the descriptor that holds the lock
    (closing it releases the lock). FileExistsError if `path` exists."""
    tmp = "%s.%s.tmp" % (path, uuid.uuid4().hex[:12])
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        _lock(fd, exclusive=True)
        _write_all(fd, content)
        try:
            os.link(tmp, path)  # atomic, and fails if the name is taken
        except FileExistsError:
            raise
        except OSError:  # a file system without hard links: create the name itself, exclusively
            os.close(fd)
            fd = -1
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            _lock(fd, exclusive=True)
            _write_all(fd, content)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return fd


def held(path: str) -> bool:
    """Is a live process holding this journal (recording, or recovering it)?"""
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        return _held_exclusively(fd)
    finally:
        os.close(fd)


def take(path: str) -> Optional[int]:
    """Lock an existing journal no live process holds; returns the descriptor holding the
    lock, or None at once if a writer or recovery holds it. FileNotFoundError if there is none."""
    fd = os.open(path, os.O_RDWR)
    deadline = time.monotonic() + BRIEF
    while True:
        try:
            _lock(fd, exclusive=True)
            return fd
        except BlockingIOError:
            if _held_exclusively(fd) or time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.02)


def remove_stale(path: str, vanished_ok: bool = True) -> bool:
    """Remove a journal no live process holds: True once it is gone. False if a live process
    holds it; with vanished_ok=False also if it was gone or replaced before it could be locked
    (its recording finished meanwhile: a writer that found it there must not go on)."""
    try:
        fd = take(path)
    except FileNotFoundError:
        return vanished_ok
    if fd is None:
        return False
    try:
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            return vanished_ok
        if not same:
            return vanished_ok
        os.unlink(path)
        return True
    finally:
        os.close(fd)


def _held_exclusively(fd: int) -> bool:
    """Does another open file hold an exclusive lock (a writer's or a recovery's) on this one,
    rather than shared ones (readers asking held()) or none?"""
    if fcntl is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def _lock(fd: int, exclusive: bool) -> None:
    if fcntl is not None:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
