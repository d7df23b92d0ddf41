"""Progress lines and colour: on a terminal only, never in logs, never with NO_COLOR."""

from __future__ import annotations

import io

import numpy as np

import tracekit
from tracekit.cli import main
from tracekit.report.terminal import GREEN, Progress, colour

from ..comparison.test_compare import write


class Terminal(io.StringIO):
    def isatty(self):
        return True


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_progress_line_with_rate_and_time_left():
    out, clock = Terminal(), Clock()
    progress = Progress("replaying g.h5", out, clock=clock)
    progress(0, 10)
    clock.now += 2.0
    progress(4, 10)
    assert out.getvalue().endswith("\rreplaying g.h5: 4/10 steps, 2 steps/s, 3 s left")
    clock.now += 0.1
    progress(5, 10)  # within 0.2 s of the last line: not redrawn
    assert "5/10" not in out.getvalue()
    clock.now += 3.0
    progress(10, 10)
    assert out.getvalue().endswith("\rreplaying g.h5: 10/10 steps, 1.96 steps/s, done in 5 s\n")
    progress.close()  # already ended
    assert out.getvalue().count("\n") == 1


def test_no_total_and_an_early_end():
    out, clock = Terminal(), Clock()
    with Progress("recording", out, clock=clock) as progress:
        progress(1)
        clock.now += 61
        progress(120)
        assert out.getvalue().endswith("\rrecording: 120 steps, 1.97 steps/s")
    assert out.getvalue().endswith("\n")  # close() ended the line
    assert "left" not in out.getvalue()


def test_nothing_when_not_a_terminal():
    out = io.StringIO()
    with Progress("verifying", out) as progress:
        for k in range(5):
            progress(k + 1, 5)
    assert out.getvalue() == ""


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert colour("MATCH", GREEN, Terminal()) == "\033[32mMATCH\033[0m"
    assert colour("MATCH", GREEN, io.StringIO()) == "MATCH"
    monkeypatch.setenv("NO_COLOR", "1")
    assert colour("MATCH", GREEN, Terminal()) == "MATCH"


def test_compare_reports_progress_and_the_cli_stays_plain_in_logs(tmp_path, capsys):
    golden = write(str(tmp_path / "g.h5"))
    actual = write(str(tmp_path / "a.h5"), change=lambda k, key, v: v + np.float32(1) if key == "loss/loss" else v)
    calls = []
    tracekit.compare(golden, actual, progress=lambda *a: calls.append(a))
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert main(["diff", golden, actual]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("MISMATCH  ") and "\033[" not in captured.out and "\r" not in captured.err
