"""Opening a trace's path: which backend reads it (a golden, an unfinished recording's journal,
a golden at a URL), and what a recording to that path that runs, was interrupted or is finishing
as we look means for the reader. `tracekit.open(path)` is `open_trace`."""

from __future__ import annotations

import os
from typing import Optional, Tuple

from ..errors import CorruptTrace, GoldenNotFound, NotATrace
from ._format import HDF5_SIGNATURE, JOURNAL_MAGIC, JOURNAL_SUFFIX, USERBLOCK_MAGIC, USERBLOCK_SIZE, journal_path, \
    userblock_token
from ._journal import journal_opening
from ._lock import held
from ._screen import trust
from .reader import Trace
from .remote import is_url


def open_trace(path: "str | os.PathLike") -> "Trace":
    """Open a golden (or an unfinished trace a killed writer left) for reading. While a new
    recording to a golden's path runs (or after it was interrupted) the golden there is
    what opens, with `trace.recording` saying so; naming the journal opens the recording.
    A URL (https://, s3://, gs://, ...) opens a finished golden there, read by ranges (remote.py)."""
    path = os.fspath(path)
    if is_url(path):
        return _open_url(path)
    named = path.endswith(JOURNAL_SUFFIX) and os.path.isfile(path) and _signature(path) == JOURNAL_MAGIC
    if named:
        path = path[:-len(JOURNAL_SUFFIX)]  # the journal was named: read its trace
    journal = journal_path(path)
    unfinished, data = _unfinished(path, journal, named)
    if unfinished is not None:
        return unfinished
    recording = None
    if data is not None:  # beside a golden that stays whole until the recording replaces it
        recording = ("a new recording to this path %s (`tracekit show %s`)" % (
            "is running" if held(journal) else "was interrupted: `tracekit recover` puts what it committed in "
            "place of this golden", journal))
    if not os.path.exists(path):
        raise GoldenNotFound("no trace at %s: check the path, or record it first (tracekit record)" % path)
    if os.path.isdir(path):
        raise NotATrace("%s is a directory, not a trace file" % path)
    head = _signature(path, USERBLOCK_SIZE + len(HDF5_SIGNATURE))
    if head[:len(HDF5_SIGNATURE)] == HDF5_SIGNATURE or head[USERBLOCK_SIZE:] == HDF5_SIGNATURE:
        from ._backends.hdf5 import HDF5Backend

        trace = Trace(HDF5Backend(path))
        trace.recording = recording
        return trace
    if head.startswith(USERBLOCK_MAGIC):
        raise CorruptTrace("%s is an unfinished tracekit golden whose journal %s is missing; it cannot be "
                           "read or recovered without it" % (path, journal))
    raise NotATrace("%s is not a tracekit golden: it is neither HDF5 nor a tracekit journal%s"
                    % (path, " (the file is empty)" if not head else ""))


def open_written(path: str) -> "Trace":
    """Open a trace this process, or a child it forked, has just written whole and closed: read
    without the first-open walk of a golden from elsewhere (_screen.py), as the writer's own
    process reads what it wrote."""
    trust(path)
    return open_trace(path)


def _unfinished(path: str, journal: str, named: bool) -> "Tuple[Optional[Trace], Optional[str]]":
    """(the unfinished recording to open instead of a golden, or None; the file of chunks of a
    recording beside the golden, or None). A recording that finishes as we look moves its files
    (chunks renamed into the golden, the journal removed): we look again."""
    from ._backends.journal import JournalBackend

    data = None
    for _ in range(3):
        data = unfinished_data(path, journal) if os.path.exists(journal) else None
        if data is None or not (named or data == path or not os.path.exists(path)):
            return None, data
        try:
            return Trace(JournalBackend(path, journal, data)), data
        except (FileNotFoundError, CorruptTrace):
            # Damage that stays is reported as it is; files that moved between our looks are not damage.
            if os.path.exists(journal) and unfinished_data(path, journal) == data:
                raise
    return None, data


def _open_url(url: str) -> "Trace":
    """A golden at a URL: a finished one only (a recording's journal is local to its machine)."""
    from ._backends.hdf5 import HDF5Backend
    from .remote import open_url

    source = open_url(url)
    try:
        head = source.head
        if head[:len(HDF5_SIGNATURE)] != HDF5_SIGNATURE and head[USERBLOCK_SIZE:] != HDF5_SIGNATURE:
            if head.startswith(USERBLOCK_MAGIC):
                raise CorruptTrace("%s is an unfinished tracekit golden: only finished goldens are read from URLs "
                                   "(recover it where it was recorded, then upload it)" % url)
            raise NotATrace("%s is not a tracekit golden: it is not HDF5%s" % (url, " (the file is empty)"
                                                                               if not head else ""))
        return Trace(HDF5Backend(url, source=source))
    except BaseException:
        source.close()
        raise


def _signature(path: str, size: int = len(JOURNAL_MAGIC)) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(size)


def unfinished_data(path: str, journal: str) -> Optional[str]:
    """The file holding the chunks of the unfinished recording the journal describes, or None
    if the recording is over: its golden is at `path` (finished, or put there by a recovery,
    and the writer died before removing the journal, or is removing it now)."""
    opening = journal_opening(journal)
    if opening is None:
        return path  # a damaged journal: its backend says so
    token = userblock_token(path)
    if opening.data:  # written beside the path, renamed there when finished
        return None if token == opening.token else path + opening.data
    return path if token in (opening.token, None) else None  # written at the path itself
