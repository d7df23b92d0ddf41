"""Run a call in a forked child process, so that a crash inside a C library it drives (HDF5
reading a damaged file can die of SIGSEGV or abort in free()) is reported instead of
suffered. The child inherits everything already imported and loaded, so this costs a
fork, not a new interpreter; its result or exception comes back pickled through a pipe.
Where there is no fork (Windows) the call runs in this process."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import pickle
import signal
import sys
import warnings
from typing import Any, Callable, TypeVar

T = TypeVar("T")


class ChildCrashed(Exception):
    """The child process died of a signal (`signal_name`: "SIGSEGV", ...) before it answered."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def in_child(call: Callable[..., T], *args: Any, hold: Any = None) -> T:
    """call(*args) in a forked child: its result, or the exception it raised (if it pickles;
    else a RuntimeError naming it). ChildCrashed if the child died of a signal. `hold`: a lock
    taken around the fork, so that no other thread holds it as the child is made (a lock held
    by another thread at the fork stays held forever in the child)."""
    if not hasattr(os, "fork"):  # pragma: no cover  # Windows
        return call(*args)
    read, write = os.pipe()
    with hold if hold is not None else contextlib.nullcontext(), warnings.catch_warnings():
        # JAX warns of any fork: the child touches none of its threads' state (it reads a file)
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        pid = os.fork()
    if pid == 0:  # the child: answer through the pipe, then leave without running the parent's exit handlers
        try:
            os.close(read)
            faulthandler.disable()  # a crash is the parent's one line to report, not a dump on stderr
            try:
                answer = (True, call(*args))
            except BaseException as exc:  # noqa: BLE001  # handed to the parent, which raises it
                answer = (False, exc)
            try:
                data = pickle.dumps(answer)
            except Exception:  # noqa: BLE001
                data = pickle.dumps((False, RuntimeError("%s: %s" % (type(answer[1]).__name__, answer[1]))))
            with os.fdopen(write, "wb") as pipe:
                pipe.write(data)
        finally:
            for stream in (sys.stdout, sys.stderr):  # what the call printed, before leaving without Python's exit
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(0)
    os.close(write)
    try:
        with os.fdopen(read, "rb") as pipe:
            data = pipe.read()
    except BaseException:  # interrupted here (Ctrl-C): the child goes too, and no zombie stays
        with contextlib.suppress(OSError):  # gone already: it is still reaped below
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
        raise
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "signal %d" % number
        raise ChildCrashed(name)
    if not data:
        raise ChildCrashed("exit %d without an answer" % os.WEXITSTATUS(status))
    try:
        ok, value = pickle.loads(data)  # our own child's answer
    except Exception as exc:  # noqa: BLE001  # an exception whose class cannot be rebuilt from its arguments
        raise RuntimeError("the child process's answer could not be read back: %s" % exc) from None
    if ok:
        return value
    raise value
