"""A call run in a forked child: its answer, its exception, or the signal that killed it."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

import tracekit
import tracekit.store
from tracekit._isolate import ChildCrashed, in_child
from tracekit.cli import main

from .support import write_steps


def _die(sig):
    os.kill(os.getpid(), sig)


def test_the_answer_comes_back():
    assert in_child(lambda a, b: {"sum": a + b, "pid": os.getpid()}, 2, 3)["sum"] == 5
    assert in_child(os.getpid) != os.getpid()


def test_the_exception_comes_back():
    def fail():
        raise tracekit.CorruptTrace("g.h5: damaged")
    with pytest.raises(tracekit.CorruptTrace, match="g.h5: damaged"):
        in_child(fail)


@pytest.mark.parametrize("sig, name", [(signal.SIGSEGV, "SIGSEGV"), (signal.SIGABRT, "SIGABRT")])
def test_a_crash_is_reported_not_suffered(sig, name):
    with pytest.raises(ChildCrashed) as err:
        in_child(_die, sig)
    assert err.value.signal_name == name


def test_verify_and_show_report_a_crash_of_the_library(tmp_path, monkeypatch, capsys):
    path = write_steps(str(tmp_path / "g.h5"), 2)
    checking = sys.modules["tracekit.store.verify"]  # the module; tracekit.store.verify is the function
    monkeypatch.setattr(checking, "_verify", lambda *args: _die(signal.SIGSEGV))  # the library dies reading
    crashed = "%s: the HDF5 library crashed reading it (SIGSEGV); the file is damaged: restore it or record it " \
              "again" % path
    # the Python API: the crash is a problem found, in a child; this process lives on
    result = tracekit.verify(path)
    assert not result.ok and result.problems == [crashed]
    assert main(["verify", path, path]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == ["DAMAGED  %s: 1 problem" % path, "  " + crashed] * 2  # and it went on to the next file
    monkeypatch.setattr(tracekit.store, "open_trace", lambda *args: _die(signal.SIGABRT))
    assert main(["show", path]) == 1
    assert "damaged: %s: the HDF5 library crashed reading it (SIGABRT)" % path in capsys.readouterr().err


def _sleep_after_writing_pid(path):
    with open(path, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(30)


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timer")
def test_an_interrupted_parent_takes_its_child_along(tmp_path):
    class Stop(Exception):
        pass

    def ring(*_):
        raise Stop()
    path = str(tmp_path / "pid")
    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    start = time.perf_counter()
    try:
        with pytest.raises(Stop):
            in_child(_sleep_after_writing_pid, path)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.perf_counter() - start < 10  # not the child's 30 s
    with open(path) as f:
        pid = int(f.read())
    with pytest.raises(ProcessLookupError):  # killed and reaped: no zombie left
        os.kill(pid, 0)
