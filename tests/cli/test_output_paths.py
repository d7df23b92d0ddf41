"""A golden's path is checked before anything runs: `tracekit record -o DIR` (a directory, or a
file in a directory that does not exist) says so in one line before the script trains, and
`tracekit recover DIR` is a one-line error that leaves nothing behind."""

from __future__ import annotations

import fnmatch
import os
import sys

import pytest

import tracekit
from tracekit.cli import main

from ..support import run_python

SCRIPT = "open(%r, 'w').write('the script ran')\n"


@pytest.mark.parametrize("output, message", [
    ("existing_dir", "existing_dir is a directory: name the golden file to write, e.g. existing_dir/golden.h5"),
    ("missing_dir/g.h5", "the directory * does not exist; create it first"),
])
def test_record_refuses_an_output_it_cannot_write_before_the_script_runs(tmp_path, output, message):
    (tmp_path / "existing_dir").mkdir()
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(SCRIPT % str(marker))
    proc = run_python(sys.executable, ["-m", "tracekit", "record", "-o", output, "--", str(script)],
                      check=False, cwd=str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("tracekit record: error: ") and fnmatch.fnmatch(line, "*" + message)
    assert not marker.exists()  # refused before the script ran
    assert sorted(os.listdir(str(tmp_path))) == ["existing_dir", "train.py"]  # no journal, no partial file


def test_create_refuses_a_directory(tmp_path):
    with pytest.raises(tracekit.TraceWriteError, match="is a directory: name the golden file"):
        tracekit.create(str(tmp_path))
    assert os.listdir(str(tmp_path)) == [] and not os.path.exists(str(tmp_path) + ".journal")


def test_recover_of_a_directory_is_one_line(tmp_path, capsys):
    target = tmp_path / "out"
    target.mkdir()
    assert main(["recover", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "tracekit recover: error: %s is a directory, not a trace: name the golden file a recording " \
                  "was writing" % target
    assert sorted(os.listdir(str(tmp_path))) == ["out"]  # no out.recovering left behind
