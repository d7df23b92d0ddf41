"""Keep a crash of the HDF5 library out of the caller's process.

HDF5 trusts a file's metadata: on a damaged golden it can read out of bounds and die of
SIGSEGV, or abort in free() on the error path after a failed checksum. That is no
exception to catch: the process is gone, pytest and the user's session with it. Whether
it dies depends on what the library read before, so no reader can tell in advance which
call will crash it; what can be told is whether HDF5 finds the file's structure damaged.

So the first time a process opens a golden, a forked child makes every HDF5 call that
reading it makes (HDF5Backend.walk: the file, its attributes, each group's links, each
dataset's header, layout and chunks, without decoding them) and reports what happened.
A golden whose walk killed the child, or made HDF5 itself report damage, is not read in
this process: `open` raises CorruptTrace, and `verify` does its work in a child, as the
CLI does. A golden the walk found whole is read here as usual. The answer is kept per
file identity (device, inode, size, modification and change times): a file that changes
is walked again. A whole answer is also kept on disk (an empty file named by the path and
identity under cache_dir()), so the next process that opens the same unchanged golden (each
test process of a CI run, each `tracekit` command) does not walk it again: the walk reads
every raw byte, 2.3 s for a 376 MB golden. The change time cannot be set by a user, so an
entry outlives no change to the file. A damaged answer is never kept on disk: it is walked
again, as it is cheap to be safe there.

The child inherits what the process has loaded, so the cost is a fork and one pass over
the file's HDF5 objects and raw bytes (tools/bench_screen.py measures it). Where there is
no fork (Windows) nothing is screened. TRACEKIT_SCREEN=0 turns it off for a process that
trusts its files; TRACEKIT_CACHE_DIR says where the answers on disk go (default:
$XDG_CACHE_HOME/tracekit, else ~/.cache/tracekit); nothing is kept there if it cannot be written.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

from .._isolate import ChildCrashed, in_child
from ..errors import CorruptTrace, GoldenNotFound, TracekitError
from ._h5compat import phil

Identity = Tuple[int, int, int, int, int]


@dataclass(frozen=True)
class Screening:
    """What the walk of one golden found."""

    crashed: Optional[str] = None  # the signal the child died of
    unopened: Optional[TracekitError] = None  # opening it failed with this: raised again, not retried here
    damage: Tuple[str, ...] = ()  # what HDF5 itself raised on the way: its structure is damaged

    @property
    def whole(self) -> bool:
        return self.crashed is None and self.unopened is None and not self.damage


class DamagedStructure(CorruptTrace):
    """A golden HDF5 crashed on or reported damaged in a child: not read in this process."""


# The signals a crash of the library ends a process with. Another (SIGKILL from an out-of-memory
# killer, SIGTERM) says nothing of the file: no answer is kept, the next opening walks again.
CRASHES = frozenset(("SIGSEGV", "SIGBUS", "SIGABRT", "SIGILL", "SIGFPE"))

_answers: Dict[Identity, Screening] = {}
_walking: Dict[Identity, threading.Lock] = {}  # one walk of a file at a time; other files meanwhile
_lock = threading.Lock()  # guards both dicts
_off = False  # set in a child that reads a damaged golden on purpose (verify)


def enabled() -> bool:
    return not _off and hasattr(os, "fork") and os.environ.get("TRACEKIT_SCREEN", "1") != "0"


def _identity(path: str) -> Identity:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def screen(path: str, walk: Callable[[str], Tuple[str, ...]]) -> None:
    """Raise unless walk(path), run in a child once per file identity, found the golden whole:
    DamagedStructure if it crashed or HDF5 raised on the way, the error opening it raised."""
    if not enabled():
        return
    try:
        key = _identity(path)
    except FileNotFoundError:
        raise GoldenNotFound("no trace at %s (it was removed as it was opened)" % path) from None
    with _lock:
        walking = _walking.setdefault(key, threading.Lock())
    with walking:
        with _lock:
            found = _answers.get(key)
        if found is None and _kept(path, key):
            found = Screening()
        if found is None:
            found = _walked(path, walk)
            if found.crashed is None or found.crashed in CRASHES:
                with _lock:
                    _answers[key] = found
            if found.whole:
                _keep(path, key)
    if found.crashed is not None and found.crashed not in CRASHES:
        raise TracekitError("%s: the process walking it was killed (%s), not by a crash of the HDF5 library; "
                            "nothing is known of the file: open it again" % (path, found.crashed))
    if found.crashed is not None:
        raise DamagedStructure("%s: the HDF5 library crashed (%s) reading its structure, in a child process; the "
                               "file is damaged: restore it or record it again" % (path, found.crashed))
    if found.unopened is not None:
        raise found.unopened
    if found.damage:
        raise DamagedStructure("%s: HDF5 reports damage in the file's structure (%d error%s, first: %s); reading it "
                               "in this process could crash the HDF5 library, so it is not read: restore it or "
                               "record it again (tracekit verify lists what is damaged)"
                               % (path, len(found.damage), "" if len(found.damage) == 1 else "s", found.damage[0]))


def _silenced(walk: Callable[[str], Tuple[str, ...]], path: str) -> Screening:
    """The child's walk, its stderr closed: a crash is reported once, by the parent, not also
    by the C library ("free(): invalid pointer")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    try:
        return Screening(damage=walk(path))
    except TracekitError as exc:
        return Screening(unopened=exc)


def _walked(path: str, walk: Callable[[str], Tuple[str, ...]]) -> Screening:
    try:
        return in_child(_silenced, walk, path, hold=phil)  # no other thread of ours in HDF5 at the fork
    except ChildCrashed as crash:
        return Screening(crashed=crash.signal_name)
    except Exception:  # noqa: BLE001  # the walk itself failed: no verdict, the file is read as before
        return Screening()


def trust(path: str) -> None:
    """A golden this process has just written whole (a writer's close, a recovery): reading it
    needs no walk while it stays as it is."""
    try:
        key = _identity(path)
    except OSError:
        return  # gone already: nothing to trust
    with _lock:
        _answers[key] = Screening()


def off_in_this_process() -> None:
    """A child that reads a golden the screen refused, to report its damage (verify), reads it."""
    global _off
    _off = True


def forget() -> None:
    """Walk every file again at its next opening, in any process (tests)."""
    with _lock:
        _answers.clear()
        _walking.clear()
    shutil.rmtree(os.path.join(cache_dir(), SCREENED), ignore_errors=True)


SCREENED = "screened"  # the folder of whole answers under cache_dir()


def cache_dir() -> str:
    """Where tracekit keeps what it can compute again: TRACEKIT_CACHE_DIR, else the user's cache."""
    given = os.environ.get("TRACEKIT_CACHE_DIR")
    if given:
        return given
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tracekit")


def _entry(path: str, key: Identity) -> str:
    name = hashlib.sha256(("%s|%s" % (os.path.realpath(path), "|".join(map(str, key)))).encode()).hexdigest()
    return os.path.join(cache_dir(), SCREENED, name)


def _kept(path: str, key: Identity) -> bool:
    """A walk in some process found this file whole, as it is now."""
    return os.path.exists(_entry(path, key))


def _keep(path: str, key: Identity) -> None:
    entry = _entry(path, key)
    try:
        os.makedirs(os.path.dirname(entry), exist_ok=True)
        with open(entry, "a"):
            pass
    except OSError:  # a read-only home, a full disk: the next process walks again
        pass
