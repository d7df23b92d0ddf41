"""The replay loop is framework-neutral: a numpy runner replays a golden through it."""

from __future__ import annotations

import contextlib
import types

import numpy as np
import pytest

import tracekit
from tracekit.replay.loop import replay_steps
from tracekit.replay.options import ReplayOptions

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
        self.full = []  # per step: captured in full
        self.reads = 0

    def after_step(self, index):
        pass

    def read_state(self, digested=()):
        self.reads += 1
        return [("var/w:0", self.w.copy())]

    def regularization(self):
        return None

    def own_initial(self):
        return {}

    @contextlib.contextmanager
    def step(self, index, draws, first, full=True, counters={}, digested=()):
        self.full.append(full)
        yield types.SimpleNamespace(values={}, draws=[])

    def check_step(self, index, updated):
        pass

    def meta(self):
        return {"runner": "numpy"}

    def call(self, index, feeds, info):
        x = feeds["x:0"]
        loss = np.float32((self.w * x).sum())
        self.w = self.w - self.lr * x
        return {"loss/loss": loss, "grad/w:0": x}


def test_a_numpy_runner_replays_through_the_engine(tmp_path):
    path = _golden(str(tmp_path / "g.h5"))
    with tracekit.open(path) as golden:
        runner = NumpyRunner(golden, LR)
        actual = replay_steps(golden, runner, runner.call).trace
        assert tracekit.compare(golden, actual).ok
        assert actual.meta["replay"]["runner"] == "numpy"  # what the runner says of the replay is kept
        wrong = NumpyRunner(golden, np.float32(0.2))
        result = tracekit.compare(golden, replay_steps(golden, wrong, wrong.call).trace)
        assert (result.first_divergence.step, result.first_divergence.key) == (0, "var/w:0")


def _replay_dirs(root):
    return sorted(p.name for p in root.iterdir() if p.name.startswith("tracekit-replay-"))


def test_a_replay_without_out_leaves_nothing_behind(tmp_path, monkeypatch):
    import gc
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    path = _golden(str(tmp_path / "g.h5"))
    with tracekit.open(path) as golden:
        runner = NumpyRunner(golden, LR)
        actual = replay_steps(golden, runner, runner.call).trace
        assert _replay_dirs(tmp_path / "tmp") and tracekit.compare(golden, actual).ok
        kept = actual.save(str(tmp_path / "kept.h5"))
        actual.close()  # closing removes it
        assert _replay_dirs(tmp_path / "tmp") == [] and tracekit.open(kept).complete

        runner = NumpyRunner(golden, LR)
        actual = replay_steps(golden, runner, runner.call).trace
        assert len(_replay_dirs(tmp_path / "tmp")) == 1
        del actual  # dropping it removes it too
        gc.collect()
        assert _replay_dirs(tmp_path / "tmp") == []

        class Failing(NumpyRunner):
            def call(self, index, feeds, info):
                if self.w[0] < 0:
                    raise RuntimeError("the port broke")
                return NumpyRunner.call(self, index, feeds, info)
        broken = Failing(golden, np.float32(10.0))  # w goes negative after the first step
        with pytest.raises(RuntimeError, match="the port broke"):
            replay_steps(golden, broken, broken.call)
        assert _replay_dirs(tmp_path / "tmp") == []  # a failed replay leaves nothing either


def test_a_replay_with_out_is_kept(tmp_path):
    path = _golden(str(tmp_path / "g.h5"))
    with tracekit.open(path) as golden:
        runner = NumpyRunner(golden, LR)
        out = str(tmp_path / "actual.h5")
        replay_steps(golden, runner, runner.call, out=out).trace.close()
    with tracekit.open(out) as actual:
        assert actual.complete and len(actual) == 3


def test_every_k_captures_light_kinds_every_step_and_the_rest_every_k(tmp_path):
    path = _golden(str(tmp_path / "g.h5"), steps=7)
    with tracekit.open(path) as golden:
        runner = NumpyRunner(golden, LR)
        actual = replay_steps(golden, runner, runner.call, ReplayOptions(every=3)).trace
        assert runner.full == [True, False, False, True, False, False, True]
        assert runner.reads == 1 + 3  # the initial state, then steps 0, 3 and 6 only
        for k in range(7):
            kinds = {key.split("/")[0] for key in actual.step(k)}
            assert kinds == ({"input", "loss", "grad", "var"} if k % 3 == 0 else {"input", "loss"}), k
        assert actual.meta["replay"]["every"] == 3
        result = tracekit.compare(golden, actual)
        assert result.ok and result.tensor("grad", "w:0").steps == 3 and result.tensor("loss", "loss").steps == 7
        wrong = NumpyRunner(golden, np.float32(0.2))
        result = tracekit.compare(golden, replay_steps(golden, wrong, wrong.call, ReplayOptions(every=3)).trace)
        assert (result.first_divergence.step, result.first_divergence.key) == (0, "var/w:0")
        for bad in (0, -1, 1.5, True):
            with pytest.raises(tracekit.UsageError, match="every must be an integer >= 1"):
                ReplayOptions(every=bad)


def test_a_comparer_fed_as_the_steps_run_finds_what_compare_finds(tmp_path):
    # The loop hands each step's values to a sink; a Comparer so fed, with nothing written,
    # gives compare()'s result, and stop() ends the replay one step after the step that diverged.
    from tracekit.comparison.engine import comparer

    path = _golden(str(tmp_path / "g.h5"), steps=7)
    with tracekit.open(path) as golden:
        for lr, every in ((LR, 1), (np.float32(0.2), 1), (np.float32(0.2), 3)):
            runner = NumpyRunner(golden, lr)
            actual = replay_steps(golden, runner, runner.call, ReplayOptions(every=every)).trace
            expected = tracekit.compare(golden, actual)
            runner = NumpyRunner(golden, lr)
            sink = comparer(golden, "streamed", actual.meta)
            replayed = replay_steps(golden, runner, runner.call, ReplayOptions(every=every), write=False, sink=sink)
            result = sink.finish(replayed.meta, replayed.steps)
            assert replayed.trace is None and replayed.steps == 7 and result.actual == "streamed"
            assert result.ok == expected.ok == (lr == LR)
            assert [(t.key, sorted(t.by_step), t.failed_steps) for t in result.tensors] == \
                [(t.key, sorted(t.by_step), t.failed_steps) for t in expected.tensors]
            for got, want in zip(result.tensors, expected.tensors):
                assert all(got.by_step[k].max_abs == want.by_step[k].max_abs for k in got.by_step)
            first = result.first_divergence
            assert (first and (first.step, first.key)) == (expected.first_divergence and (0, "var/w:0"))
        runner = NumpyRunner(golden, np.float32(0.2))
        sink = comparer(golden, "streamed", actual.meta)
        replayed = replay_steps(golden, runner, runner.call, write=False, sink=sink, stop=lambda: sink.diverged)
        result = sink.finish(replayed.meta, replayed.steps)
        # a step is judged once the next one is fed (its reads overlap the judging): one step more
        assert replayed.steps == 2 and replayed.meta["replay"]["stopped"] and replayed.meta["replay"]["limited"]
        assert result.short is None and result.steps == 2 and not result.ok and result.first_divergence.step == 0


class FailingSink:
    takes_initial = True

    def __init__(self):
        self.seen = []

    def initial(self, values):
        pass

    def step(self, index, values, reasons, fed):
        self.seen.append(index)
        if index == 1:
            raise tracekit.CorruptTrace("g.h5: step 1 unreadable")


def test_a_sink_behind_the_replay_hands_its_error_to_the_replay(tmp_path):
    from tracekit.replay.behind import Behind

    path = _golden(str(tmp_path / "g.h5"), steps=7)
    with tracekit.open(path) as golden:
        sink = FailingSink()
        behind = Behind(sink)
        runner = NumpyRunner(golden, LR)
        with pytest.raises(tracekit.CorruptTrace, match="step 1 unreadable"):
            replay_steps(golden, runner, runner.call, write=False, sink=behind)
            behind.close()
        assert sink.seen == [0, 1]  # the steps queued after the failure are dropped
    for quiet in (False, True):  # quiet: the replay failed itself, and its error is the news
        sink = FailingSink()
        behind = Behind(sink)
        behind.step(0, {}, {}, {})
        behind.step(1, {}, {}, {})
        if quiet:
            behind.close(quiet=True)
        else:
            with pytest.raises(tracekit.CorruptTrace, match="step 1 unreadable"):
                behind.close()


class StepsSink:
    def __init__(self, takes_initial):
        self.takes_initial, self.initials, self.seen = takes_initial, [], []

    def initial(self, values):
        self.initials.append(sorted(values))

    def step(self, index, values, reasons, fed):
        self.seen.append(index)


@pytest.mark.parametrize("takes_initial", [True, False])
def test_the_initial_state_is_read_only_for_a_sink_that_takes_it(tmp_path, takes_initial):
    # an envelope's perturbed runs take the steps only: the whole state is then not read before step 0
    path = _golden(str(tmp_path / "g.h5"), steps=3)
    with tracekit.open(path) as golden:
        runner = NumpyRunner(golden, LR)
        reads = []
        read_state = runner.read_state
        runner.read_state = lambda digested=(): reads.append(1) or read_state(digested)
        sink = StepsSink(takes_initial)
        replay_steps(golden, runner, runner.call, write=False, sink=sink)
    assert sink.seen == [0, 1, 2]
    assert bool(sink.initials) == takes_initial and (not takes_initial or "var/w:0" in sink.initials[0])
    assert len(reads) == 3 + takes_initial  # after each step, and before the first only where taken
