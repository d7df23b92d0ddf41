"""Session runs on other threads go on while a step runs. Queue-fed TF1 pipelines run the session
on their own threads (QueueRunner, numpy_input_fn's feeding threads) to fill the queue a training
run is waiting on; a recorder that held the session for the whole step hung them forever. Their
runs are not steps; the dequeued batches are the step's inputs."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import tracekit

from ..support import ROOT
from ..support.recording import record_cli

# a canned Estimator on numpy_input_fn: the corpus program estimator_dnn_queue
CORPUS_DNN_QUEUE = os.path.join(ROOT, "tools", "corpus", "programs", "estimator_dnn_queue.py")
HANG_S = 120  # a hang fails the test here instead of holding the suite; the runs take seconds


def test_a_queue_runner_feeds_the_step_it_waits_in(tmp_path):
    path = tmp_path / "queue.h5"
    proc = record_cli(path, "queue_loop.py", "--steps", 12, timeout=HANG_S)
    printed = [float(v) for v in re.findall(r"^step \d+ loss (\S+)$", proc.stdout, re.M)]
    data = np.random.RandomState(0).randn(64, 3).astype(np.float32)  # what queue_loop.py enqueues
    with tracekit.open(str(path)) as trace:
        assert len(trace) == 12 and trace.complete  # the enqueue runs were not steps
        assert trace.names("input") == ["x:0"]
        for step, loss in zip(trace, printed):
            batch = step["input/x:0"]
            assert batch.shape == (4, 3) and all((data == row).all(axis=1).any() for row in batch)
            assert round(float(step["loss/loss"]), 5) == loss
            assert step.names("grad") == ["out/kernel:0", "out/bias:0"]
    assert len(printed) == 12


@pytest.mark.tf1
def test_a_canned_estimator_on_numpy_input_fn_records(tmp_path):
    path = tmp_path / "estimator.h5"
    record_cli(path, CORPUS_DNN_QUEUE, "--steps", 5, str(tmp_path / "model_dir"), timeout=HANG_S)
    with tracekit.open(str(path)) as trace:
        assert len(trace) == 5 and trace.complete
        inputs = trace.names("input")
        assert len(inputs) == 4  # the queue's row index, features a and b, the labels
        for step in trace:
            assert all(step["input/" + name].shape == (8,) for name in inputs)
        assert len(trace.names("grad")) == 4
        assert all(name.endswith("/Adagrad:0") for name in trace.names("slot")) and len(trace.names("slot")) == 4
