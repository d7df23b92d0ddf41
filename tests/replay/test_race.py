"""A TF1 step that reads its global step for the learning rate unordered with the counter's
increment records, at each step, whichever value the scheduler let it read. Recorded for real
(TF 1.15): the recorder says so in the golden; a correct port of the schedule departs where the
golden read the moved counter, and the hint names the race. The same step with the increment
ordered after the update matches."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tracekit
from tracekit.comparison.slips import LR_RACE

from ..support import ROOT, run_python
from ..support.recording import SCRIPTS

STEPS = 10


def _record(legacy_python, path, *options):
    run_python(legacy_python, ["-m", "tracekit", "record", "-o", path, "--", os.path.join(SCRIPTS, "racy_step.py"),
                               "--steps", str(STEPS)] + list(options), cwd=ROOT)
    return path


@pytest.fixture(scope="module")
def goldens(legacy_python, tmp_path_factory):
    where = tmp_path_factory.mktemp("race")
    ordered = _record(legacy_python, str(where / "ordered.h5"), "--ordered")
    for attempt in range(4):  # the scheduler decides: keep a recording where the race showed
        racy = _record(legacy_python, str(where / ("racy%d.h5" % attempt)), "--late-read")
        if _moved(racy):
            return ordered, racy
    pytest.fail("in 4 recordings, no step read the incremented counter: the race never showed")


def _schedule(step):
    return np.float32(0.1 * 0.5 ** step)


def _moved(path):
    """The steps whose recorded rate is the next step's: the counter was read after its increment."""
    with tracekit.open(path) as golden:
        return [k for k in range(len(golden)) if np.isclose(golden.step(k)["lr/learning_rate"], _schedule(k + 1))]


def _port(tf):
    """The TF1 schedule in Keras: evaluated at the optimizer's iterations, TF1's counter before the step."""
    w = tf.Variable(tf.ones([3, 1]), name="w")
    schedule = tf.keras.optimizers.schedules.ExponentialDecay(0.1, 1, 0.5, staircase=True)
    optimizer = tf.keras.optimizers.SGD(schedule)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(inputs["x:0"], w)))
        optimizer.apply_gradients([(tape.gradient(loss, w), w)])
        return {"loss": loss}
    return [w], step


def _compare(tf2, path):
    variables, step = _port(tf2.tf)
    with tf2.replay(path, step, variables=variables) as actual:
        return tracekit.compare(path, actual, tracekit.Tolerance.training())


def test_an_ordered_step_matches(tf2, goldens):
    ordered, _ = goldens
    with tracekit.open(ordered) as golden:
        assert golden.meta.get("races", []) == []
    result = _compare(tf2, ordered)
    assert result.ok, result.report()


def test_a_race_is_named_where_the_golden_read_the_moved_counter(tf2, goldens):
    _, racy = goldens
    with tracekit.open(racy) as golden:
        assert [r["lr"] for r in golden.meta["races"]] == ["lr/learning_rate"]
    result = _compare(tf2, racy)
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == (_moved(racy)[0], "lr/learning_rate"), result.report()
    assert [h.code for h in result.slips] == [LR_RACE]
    assert "a race in the TF1 training step" in result.report()
