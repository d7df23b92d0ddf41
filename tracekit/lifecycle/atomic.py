"""Writes that are all or nothing, and one writer per goldens directory at a time.

A golden is never written in place: the new file is written beside it under a hidden
temporary name, flushed to disk, and renamed over the old one (readers see the old file or
the new, never a mix). Rewrites of goldens in one directory hold an exclusive lock on the
directory (flock, released if the process dies), so concurrent accepts and updates take
turns and each sees what the previous one wrote. Where flock does not exist (Windows), the
rename is still atomic but concurrent writers are not serialized.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from typing import Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def locked(directory: str) -> Iterator[None]:
    """Hold the exclusive lock of `directory` (created if missing) for the block."""
    os.makedirs(directory, exist_ok=True)
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def temporary_beside(path: str) -> str:
    """A hidden name in `path`'s directory, for a file that will be renamed to `path`."""
    directory, name = os.path.split(os.path.abspath(path))
    return os.path.join(directory, ".%s.%d-%s.tmp" % (name, os.getpid(), uuid.uuid4().hex[:8]))


def _fsync(path: str, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on directories
        if not directory:
            raise
    finally:
        os.close(fd)


def publish(temporary: str, path: str) -> None:
    """Flush `temporary` to disk and rename it to `path`, replacing what was there."""
    _fsync(temporary)
    os.replace(temporary, path)
    if os.name == "posix":  # the rename itself, durable; elsewhere a directory cannot be opened to flush
        _fsync(os.path.dirname(os.path.abspath(path)), directory=True)


def copy(source: str, path: str) -> None:
    """Copy `source` to `path` atomically."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    temporary = temporary_beside(path)
    try:
        shutil.copyfile(source, temporary)
        publish(temporary, path)
    except BaseException:
        discard(temporary)
        raise


def write_text(path: str, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically: a reader sees the old file or the whole new one."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    temporary = temporary_beside(path)
    try:
        with open(temporary, "w", encoding="utf-8") as fh:
            fh.write(text)
        publish(temporary, path)
    except BaseException:
        discard(temporary)
        raise


def discard(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
