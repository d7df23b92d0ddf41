"""The replay loop is framework-neutral: a numpy runner replays a golden through it."""

from __future__ import annotations

import contextlib
import types

import numpy as np

import tracekit
from tracekit.replay.loop import replay_steps

from ..support import build_golden

LR = np.float32(0.1)


def _golden(path, steps=3):
    """SGD on loss = sum(w * x): the gradient is x."""
    w = np.arange(4, dtype=np.float32)

    def sgd():
        nonlocal w
        for k in range(steps):
            x = np.full(4, k + 1, np.float32)
            values = {"input/x:0": x, "loss/loss": np.float32((w * x).sum()), "grad/w:0": x}
            w = w - LR * x
            values["var/w:0"] = w
            yield values
    return build_golden(path, sgd(), {"var/w:0": w})


class NumpyRunner:
    """What replay_steps needs of a framework: state, one step at a time, the state after it."""

    def __init__(self, golden, lr):
        self.w = golden.initial["var/w:0"].copy()
        self.lr = lr
        self.not_replayed = {}

    def read_state(self):
        return [("var/w:0", self.w.copy())]

    def regularization(self):
        return None

    @contextlib.contextmanager
    def step(self, index, draws):
        yield types.SimpleNamespace(values={}, draws=[])

    def check_tape(self, index):
        pass

    def call(self, feeds):
        x = feeds["x:0"]
        loss = np.float32((self.w * x).sum())
        self.w = self.w - self.lr * x
        return {"loss/loss": loss, "grad/w:0": x}


def test_a_numpy_runner_replays_through_the_engine(tmp_path):
    path = _golden(str(tmp_path / "g.h5"))
    with tracekit.open(path) as golden:
        runner = NumpyRunner(golden, LR)
        actual = replay_steps(golden, runner, runner.call)
        assert tracekit.compare(golden, actual).ok
        wrong = NumpyRunner(golden, np.float32(0.2))
        result = tracekit.compare(golden, replay_steps(golden, wrong, wrong.call))
        assert (result.first_divergence.step, result.first_divergence.key) == (0, "var/w:0")
