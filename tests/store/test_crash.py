"""Writers really killed (SIGKILL) at random moments lose at most the step in flight.

Each run starts a writer process, kills it at a random point of its progress (also
while it finishes the golden at close), then checks that what it had committed
reads back exactly, verifies, and that `recover` makes a whole golden of it.
TRACEKIT_CRASH_RUNS sets the number of kills (default 30).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

import tracekit
from tracekit.store._format import journal_path
from tracekit.store.recover import tmp_path as recover_tmp_path

from ..support import ROOT
from ..support import payloads
from .crash_child import big

STEPS = 12
RUNS = int(os.environ.get("TRACEKIT_CRASH_RUNS", "30"))


def _kill_at_random(path, rng):
    """Start the child, kill it after a random line plus a random delay; returns its lines."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "tests.store.crash_child", path, str(STEPS)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT,
                            universal_newlines=True)
    target = rng.randrange(-1, 2 * STEPS + 2)  # which announced line to kill after; -1: any moment of start-up
    lines = []
    try:
        if target < 0:
            time.sleep(rng.random() * 1.0)  # imports, then creating the journal and the file
        while len(lines) <= target:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
        time.sleep(rng.random() * 0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        lines.extend(l.strip() for l in proc.stdout.read().splitlines())  # printed before the kill landed
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()
    return lines


def _check_content(trace, at_least):
    assert len(trace) >= at_least, (len(trace), at_least, trace.problem)
    assert len(trace) <= STEPS
    if len(trace) == 0 and len(trace.initial) == 0:
        return  # killed before the initial state was committed
    for key, value in payloads.initial_values().items():
        assert payloads.same(value, trace.initial[key])
    for step in trace:
        expected = dict(payloads.step_values(step.index))
        expected["tap/big"] = big(step.index)
        assert sorted(step) == sorted(expected)
        for key, value in expected.items():
            assert payloads.same(value, step[key]), (step.index, key)
        assert step.info == {"global_step": step.index + 1}


@pytest.mark.slow
@pytest.mark.parametrize("run", range(RUNS))
def test_killed_writer_loses_at_most_the_step_in_flight(tmp_path, run):
    rng = random.Random(run)
    path = str(tmp_path / "killed.h5")
    lines = _kill_at_random(path, rng)
    committed = [int(l.split()[1]) for l in lines if l.startswith("committed")]
    # end_step(k) returns once step k-1 is on disk: every acknowledged step but the last is durable.
    at_least = max(committed) if committed else 0
    if not os.path.exists(path) and not os.path.exists(journal_path(path)):
        assert not lines  # killed before the writer created its journal
        return
    closed = "closed" in lines
    with tracekit.open(path) as trace:
        assert trace.complete == closed or (not closed and trace.complete and "closing" in lines)
        if not trace.complete:
            assert trace.problem
        _check_content(trace, at_least)
        steps = len(trace)
    result = tracekit.verify(path)
    if not result.complete:
        assert len(result.problems) == 1 and "tracekit recover" in result.problems[0]
    else:
        assert result.ok, result.problems

    recovered = tracekit.recover(path)
    assert recovered.steps == steps
    assert tracekit.verify(path).ok
    with tracekit.open(path) as trace:
        assert trace.complete
        assert trace.recovered == (recovered.action == "recovered")
        _check_content(trace, steps)
    assert not os.path.exists(recover_tmp_path(path)) and not os.path.exists(journal_path(path))
