"""A call run in a forked child: its answer, its exception, or the signal that killed it."""

from __future__ import annotations

import os
import signal
import sys

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
