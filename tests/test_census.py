"""tools/census.py: the suite's time logged per test phase (once, by xdist's controller) and
summed by file and folder, so where the time goes can be measured again on any machine."""

from __future__ import annotations

import sys

from tools.census import summary

from .support import run_python


def test_each_phase_is_logged_once_across_xdist_workers_and_summed_by_file(tmp_path):
    (tmp_path / "test_a.py").write_text("import time\n\ndef test_one():\n    time.sleep(0.2)\n\n"
                                        "def test_two():\n    pass\n")
    (tmp_path / "test_b.py").write_text("def test_three():\n    assert False\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the project's settings
    census = tmp_path / "census.tsv"
    run_python(sys.executable, ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "-p", "tools.census",
                                "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), str(tmp_path)],
               env={"TRACEKIT_CENSUS": str(census)}, check=False)
    lines = census.read_text().splitlines()
    logged = [tuple(line.split("\t")[1:3]) for line in lines]
    assert len(logged) == len(set(logged)) == 9, lines  # 3 tests x setup, call, teardown, each once
    outcomes = {tuple(line.split("\t")[1:3]): line.split("\t")[4] for line in lines}
    assert outcomes["test_b.py::test_three", "call"] == "failed" and outcomes["test_a.py::test_one", "call"] == "passed"
    text = summary(lines)
    assert "2 tests" in text.splitlines()[1] and text.splitlines()[1].endswith("test_a.py"), text
    assert "3 tests" in text.splitlines()[0], text
