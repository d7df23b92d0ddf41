"""The read-only commands: show, verify, export, recover; exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import tracekit
from tracekit.cli import main

from ..support import ROOT, run_python
from ..support import payloads
from ..support import write_steps
from ..support.layout import get_blob, set_blob


@pytest.fixture
def golden(tmp_path):
    return write_steps(str(tmp_path / "g.h5"), 3)


def test_show(golden, capsys):
    assert main(["show", golden]) == 0
    out = capsys.readouterr().out
    assert "state     complete" in out and "steps     3 + initial state" in out
    assert "user.test: True" in out
    assert "environment." in out
    row = [l for l in out.splitlines() if l.startswith("grad ")][0].split()
    assert row[:5] == ["grad", "dense/kernel:0", "(3,", "60)", "float32"]
    assert "ratio" in out and "total:" in out


def test_verify_ok_damaged_unreadable(golden, tmp_path, capsys):
    assert main(["verify", golden]) == 0
    assert capsys.readouterr().out.startswith("ok ")
    damaged = str(tmp_path / "d.h5")
    with open(golden, "rb") as src, open(damaged, "wb") as dst:
        dst.write(src.read())
    import h5py
    with h5py.File(damaged, "r+") as f:  # the loss's checksum in its step index, the index's own made to match
        entries = get_blob(f, 2, "index")
        next(e for e in entries if e[:2] == ["loss", "loss"])[3][0]["crc"] = 7
        set_blob(f, 2, "index", entries)
    assert main(["verify", golden, damaged]) == 1
    out = capsys.readouterr().out
    assert "DAMAGED  %s: 1 problem" % damaged in out and "step 2, loss/loss: checksum mismatch" in out
    assert main(["verify", golden, str(tmp_path / "missing.h5")]) == 2
    assert "UNREADABLE no trace at" in capsys.readouterr().out
    truncated = str(tmp_path / "t.h5")
    with open(golden, "rb") as src, open(truncated, "wb") as dst:
        dst.write(src.read()[:-4096])  # the end holds HDF5's metadata: the file no longer opens
    assert main(["verify", golden, truncated]) == 1
    assert "DAMAGED  %s" % truncated in capsys.readouterr().out


def test_show_into_a_closed_pipe(tmp_path):
    # `tracekit show G | head -1`: the reader leaves early; no traceback, SIGPIPE's exit status.
    path = str(tmp_path / "wide.h5")
    with tracekit.create(path) as w:
        with w.step():
            for i in range(3000):  # a table far longer than a pipe's buffer
                w.add("tap", "layer_%04d/output" % i, np.float32(i))
    proc = subprocess.run("'%s' -m tracekit show '%s' | head -1; exit ${PIPESTATUS[0]}" % (sys.executable, path),
                          shell=True, executable="/bin/bash", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert len(proc.stdout.splitlines()) == 1
    assert proc.stderr == "" and proc.returncode == 141


def test_unfinished_then_recover(tmp_path, capsys):
    path = str(tmp_path / "u.h5")
    w = tracekit.create(path)
    for k in range(2):
        with w.step():
            w.add("loss", "loss", float(k))
    w.flush()
    assert main(["verify", path]) == 1
    assert "still being recorded (its writer is running); 2 steps are committed so far" in capsys.readouterr().out
    assert main(["show", path]) == 1
    out = capsys.readouterr().out
    assert "still being recorded" in out and "tracekit recover" not in out
    assert main(["recover", path]) == 2  # its writer is alive: the journal is locked
    assert "is still being recorded" in capsys.readouterr().err
    w._sink.journal.close()  # the writer dies: its lock goes with its file handle
    assert main(["verify", path]) == 1
    assert "Run `tracekit recover" in capsys.readouterr().out
    assert main(["show", path]) == 1
    out = capsys.readouterr().out
    assert "UNFINISHED" in out and "killed or crashed" in out
    assert main(["recover", path]) == 0
    assert "recovered %s: 2 steps" % path in capsys.readouterr().out
    assert main(["verify", path]) == 0
    assert main(["recover", path]) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_export(golden, tmp_path, capsys):
    out = str(tmp_path / "g.npz")
    assert main(["export", golden, "--npz", out]) == 0
    data = np.load(out)
    assert np.array_equal(data["step_000001/grad/dense/kernel:0"], payloads.step_values(1)["grad/dense/kernel:0"])
    assert np.array_equal(data["initial/var/dense/kernel:0"], payloads.initial_values()["var/dense/kernel:0"])
    assert float(data["step_000002/fetch/train#0"]) == 2.0  # leaf 0 of [None, 2.0]
    meta = json.loads(str(data["__meta__"]))
    assert meta["meta"]["user"] == {"test": True} and meta["complete"] is True
    assert not os.path.exists(out + ".partial")


def test_export_strings_and_bfloat16(tmp_path):
    path = str(tmp_path / "s.h5")
    cases = payloads.dtype_cases()
    with tracekit.create(path) as w:
        with w.step():
            w.add("fetch", "s", cases["object bytes"])
            w.add("fetch", "bf", cases["bfloat16"])
    out = str(tmp_path / "s.npz")
    assert main(["export", path, "--npz", out]) == 0
    data = np.load(out)  # no pickle needed
    assert data["step_000000/fetch/s"].tolist() == cases["object bytes"].tolist()
    assert data["step_000000/fetch/bf"].dtype == np.uint16
    assert json.loads(str(data["__dtypes__"])) == {"step_000000/fetch/bf": "bfloat16"}


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as err:
        main(["show"])
    assert err.value.code == 2
    with pytest.raises(SystemExit) as err:
        main(["frobnicate"])
    assert err.value.code == 2
    assert main(["show", "/nonexistent/x.h5"]) == 2
    assert "tracekit show: error: no trace at /nonexistent/x.h5" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["show", "verify", "export", "recover", "diff"])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as err:
        main([command, "--help"])
    assert err.value.code == 0
    out = capsys.readouterr().out
    assert "exit codes: 0 ok; 1" in out and "GOLDEN" in out


def test_console_script_and_module(golden):
    proc = run_python(sys.executable, ["-m", "tracekit", "verify", golden])
    assert proc.stdout.startswith("ok ")
    exe = os.path.join(os.path.dirname(sys.executable), "tracekit")
    if not os.path.exists(exe):
        pytest.fail("the tracekit console script is not installed next to %s" % sys.executable)


@pytest.mark.parametrize("target, message", [
    ("missing/o.npz", "cannot write .*missing/o.npz: the directory .*missing does not exist"),
    (".", "is a directory: give the path of the .npz file to write"),
    ("/proc/o.npz", "cannot write /proc/o.npz: "),
    ("GOLDEN", "is the trace itself"),
])
def test_export_to_a_path_it_cannot_write(golden, tmp_path, capsys, target, message):
    out = golden if target == "GOLDEN" else target if target.startswith("/") else str(tmp_path / target)
    before = sorted(os.listdir(str(tmp_path)))
    assert main(["export", golden, "--npz", out]) == 2
    out_, err = capsys.readouterr()
    assert re.match("tracekit export: error: .*%s" % message, err) and len(err.splitlines()) == 1, err
    assert sorted(os.listdir(str(tmp_path))) == before  # nothing left behind, the golden untouched
    assert tracekit.verify(golden).ok


def test_export_of_an_unfinished_trace_says_so(tmp_path, capsys):
    path, out = str(tmp_path / "u.h5"), str(tmp_path / "u.npz")
    w = tracekit.create(path)
    with w.step():
        w.add("loss", "loss", 1.0)
    w.flush()
    try:
        assert main(["export", path, "--npz", out]) == 1
        err = capsys.readouterr().err
        assert "is unfinished (it is still being recorded" in err and "exported the 1 steps committed so far" in err
        assert np.load(out)["step_000000/loss/loss"] == 1.0
    finally:
        w.close()
