"""TF1 parameter-server training (an in-process cluster of 1 ps and 2 workers, each worker a
thread with its own graph, MonitoredTrainingSession, SyncReplicasOptimizer) records one golden
per worker: --worker N takes the runs placed on that task. A worker's step is its push of its
gradient (its inputs, loss and gradient); the chief's run applying the aggregate waits for the
workers and is not a step (recording it as one would hold the step lock the workers need)."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit

from ..support.recording import record_cli


@pytest.mark.parametrize("task", [0, 1])
def test_each_worker_records_its_own_steps(tmp_path, task):
    path = tmp_path / ("worker%d.h5" % task)
    record_cli(path, "ps_cluster.py", "--steps", 3, worker=task, timeout=120)
    with tracekit.open(str(path)) as trace:
        assert trace.meta["recording"]["worker"] == task and len(trace) >= 1
        assert trace.names("grad") == ["w:0"] and "x:0" in trace.names("input")
        first = trace.step(0)
        np.testing.assert_array_equal(first["input/x:0"], np.random.RandomState(task).randn(4, 3).astype(np.float32))
        for step in trace:
            # the worker's own loss and gradient, of its own batch at one value of w (whatever the
            # other worker's pushes had made of it): 2/4 X'(Xw - 1) and mean((Xw - 1)^2)
            x, grad = step["input/x:0"].astype(np.float64), step["grad/w:0"].astype(np.float64)
            w = np.linalg.solve(x.T @ x, 2.0 * grad + x.T @ np.ones((4, 1)))
            assert np.isclose(step["loss/loss"], np.mean((x @ w - 1.0) ** 2), rtol=1e-4, atol=1e-6)
        # the variables after a step are the parameter servers' (shared); the step counter never goes back
        counts = [step.info["global_step"] for step in trace]
        assert counts == sorted(counts)
