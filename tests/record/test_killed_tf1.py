"""A TF1 loop that runs only its train op (`sess.run(train)` returns None: the most common TF1
step), recorded by `tracekit record` and killed (SIGKILL) at a random step, loses no step but the
one in flight; `tracekit recover` killed at a random moment loses nothing, and a second recover
finishes the golden. TRACEKIT_KILL_RUNS sets the number of kills (default 24)."""

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

from ..support import ROOT
from ..support.recording import SCRIPTS

pytestmark = [pytest.mark.tf1, pytest.mark.slow]

STEPS = 12
RUNS = int(os.environ.get("TRACEKIT_KILL_RUNS", "24"))
ENV = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")


def _kill_after(argv, rng, lines_before, delay):
    """Start argv; SIGKILL it `delay` seconds after its `lines_before`-th line of output (or at
    its end); returns the lines it printed."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV, cwd=ROOT,
                            universal_newlines=True)
    lines = []
    try:
        while len(lines) < lines_before:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        lines.extend(line.strip() for line in proc.stdout.read().splitlines())
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
    return lines


@pytest.mark.parametrize("run", range(RUNS))
def test_a_killed_train_op_loop_keeps_its_steps_and_a_killed_recover_loses_none(tmp_path, run):
    rng = random.Random(run)
    path = str(tmp_path / "loop.h5")
    record = [sys.executable, "-m", "tracekit", "record", "-o", path, "--",
              os.path.join(SCRIPTS, "plain_loop.py"), "--steps", str(STEPS), "--train-only"]
    lines = _kill_after(record, rng, rng.randrange(1, STEPS + 1), rng.random() * 0.05)
    ran = [int(line.split()[1]) for line in lines if line.startswith("step ")]
    # "step k" is printed once sess.run of step k returned: the recorder ended step k, which
    # returns once step k - 1 is on disk. So steps 0 .. k - 1 must all be there.
    at_least = max(ran) if ran else 0
    with tracekit.open(path) as trace:
        steps = len(trace)
        assert steps >= at_least, (steps, at_least, trace.problem)
        for step in trace:
            assert step["fetch/fetches"] is None  # the train op's result
            assert step.names("grad") and step.names("var")
    # recover killed at a random moment of its work, then run again to the end
    child = [sys.executable, "-c", "import sys, tracekit; print('ready', flush=True); "
                                   "tracekit.recover(sys.argv[1]); print('done', flush=True)", path]
    _kill_after(child, rng, 1, rng.random() * 0.08)
    with tracekit.open(path) as trace:
        assert len(trace) == steps, (len(trace), steps, trace.problem)
    result = tracekit.recover(path)
    assert result.steps == steps
    assert tracekit.verify(path).ok
    with tracekit.open(path) as trace:
        assert trace.complete and len(trace) == steps
    assert not os.path.exists(journal_path(path))
    assert sorted(os.listdir(str(tmp_path))) == ["loop.h5"]  # nothing left beside it
