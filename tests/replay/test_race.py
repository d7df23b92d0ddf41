"""A TF1 step that reads its global step for the learning rate unordered with the counter's
increment records, at each step, whichever value the scheduler let it read. Recorded for real
(TF 1.15): the recorder says so in the golden and keeps, each step, which value the read saw; a
replay feeds the port's counter so, and a correct port of the schedule matches while one a step
late departs at its step. Where the read cannot be recorded (its op does not pass the counter's
value on), a correct port departs where the golden read the moved counter, and the hint names the
race. The same step with the increment ordered after the update matches."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tracekit
from tracekit.comparison.slips import LR_RACE
from tracekit.keys import COUNTER_READS

from ..support import ROOT, run_python
from ..support.recording import SCRIPTS

STEPS = 10
LATE_FROM = 3  # the late port's schedule runs a step behind once its counter reads this


def _record(legacy_python, path, *options):
    run_python(legacy_python, ["-m", "tracekit", "record", "-o", path, "--", os.path.join(SCRIPTS, "racy_step.py"),
                               "--steps", str(STEPS)] + list(options), cwd=ROOT)
    return path


def _raced(legacy_python, where, name, *options):
    """A recording where the race showed, at some steps only (the scheduler decides: up to 6 tries)."""
    showed = None
    for attempt in range(6):
        racy = _record(legacy_python, str(where / ("%s%d.h5" % (name, attempt))), "--late-read", *options)
        moved = _moved(racy)
        if moved and any(k not in moved for k in range(STEPS - 1)):
            return racy
        showed = showed or (racy if moved else None)
    if showed is None:
        pytest.fail("in 6 recordings, no step read the incremented counter: the race never showed")
    return showed


@pytest.fixture(scope="module")
def adam_golden(legacy_python, tmp_path_factory):
    """Racy, with the reads kept, trained by TF1's Adam."""
    return _raced(legacy_python, tmp_path_factory.mktemp("race_adam"), "adam", "--adam")


@pytest.fixture(scope="module")
def goldens(legacy_python, tmp_path_factory):
    """(ordered, racy with the counter's reads kept, racy through a read that cannot be kept)."""
    where = tmp_path_factory.mktemp("race")
    return (_record(legacy_python, str(where / "ordered.h5"), "--ordered"), _raced(legacy_python, where, "racy"),
            _raced(legacy_python, where, "opaque", "--opaque-read"))


def _schedule(step):
    return np.float32(0.1 * 0.5 ** step)


def _moved(path):
    """The steps whose recorded rate is the next step's: the counter was read after its increment."""
    with tracekit.open(path) as golden:
        return [k for k in range(len(golden)) if np.isclose(golden.step(k)["lr/learning_rate"], _schedule(k + 1))]


def _port(tf, late=False, adam=False):
    """The TF1 schedule in Keras: evaluated at the optimizer's iterations, TF1's counter before the
    step; `late`: a step behind once the counter reads LATE_FROM. `adam`: Keras Adam with TF1's
    epsilon, whose bias correction reads `iterations`."""
    w = tf.Variable(tf.ones([3, 1]), name="w")
    schedule = tf.keras.optimizers.schedules.ExponentialDecay(0.1, 1, 0.5, staircase=True)

    class Late(tf.keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, counter):
            return schedule(counter - tf.cast(counter >= LATE_FROM, counter.dtype))

    rate = Late() if late else schedule
    optimizer = tf.keras.optimizers.Adam(rate, epsilon=1e-8) if adam else tf.keras.optimizers.SGD(rate)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(inputs["x:0"], w)))
        optimizer.apply_gradients([(tape.gradient(loss, w), w)])
        return {"loss": loss}
    return [w], step


def _compare(tf2, path, late=False, adam=False):
    variables, step = _port(tf2.tf, late, adam)
    with tf2.replay(path, step, variables=variables) as actual:
        return tracekit.compare(path, actual, tracekit.Tolerance.training())


def _reads(path):
    with tracekit.open(path) as golden:
        return [golden.step(k).info.get(COUNTER_READS) for k in range(len(golden))]


def test_an_ordered_step_matches(tf2, goldens):
    ordered = goldens[0]
    with tracekit.open(ordered) as golden:
        assert golden.meta.get("races", []) == []
    assert _reads(ordered) == [None] * STEPS
    result = _compare(tf2, ordered)
    assert result.ok, result.report()


def test_the_counter_a_racy_rate_read_is_kept_and_fed_to_the_port(tf2, goldens):
    racy = goldens[1]
    moved = _moved(racy)
    # each step's read, checked against the counter before and after it, where the rates show it
    assert _reads(racy) == [{"global_step:0": int(k in moved)} for k in range(STEPS)]
    result = _compare(tf2, racy)
    assert result.ok, result.report()
    assert "global_step:0 read as TF1's racy learning rate read it, past its increment, at %d of the %d steps fed " \
           "(from step %d)" % (len(moved), STEPS, moved[0]) in result.report()


def test_a_schedule_a_step_late_is_caught_at_its_step_on_a_racy_golden(tf2, goldens):
    racy = goldens[1]
    moved = set(_moved(racy))
    late_at = next(k for k in range(STEPS) if k + (k in moved) >= LATE_FROM)  # where its counter reads LATE_FROM
    result = _compare(tf2, racy, late=True)
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == (late_at, "lr/learning_rate"), result.report()


def test_only_the_schedule_takes_the_read_keras_adams_bias_correction_counts_on(tf2, adam_golden):
    # Keras Adam corrects by its iterations, TF1's Adam by its own beta powers: were iterations
    # moved, the correction would be the next step's wherever the golden's rate was
    moved = _moved(adam_golden)
    assert moved and _reads(adam_golden) == [{"global_step:0": int(k in moved)} for k in range(STEPS)]
    result = _compare(tf2, adam_golden, adam=True)
    assert result.ok, result.report()
    assert "the port's optimizers' learning-rate schedules took it" in result.report()


def test_localize_finds_a_late_schedule_at_its_step_on_a_racy_golden_whose_reads_are_kept(tf2, goldens):
    # no step is excused as a race where the replay fed the read: the late schedule is the port's
    racy = goldens[1]
    moved = set(_moved(racy))
    late_at = next(k for k in range(STEPS) if k + (k in moved) >= LATE_FROM)

    def make_port():
        variables, step = _port(tf2.tf, late=True)
        return None, step, {"variables": variables}
    found = tf2.localize(racy, make_port)
    assert found.state.raced == [] and (found.step, found.key) == (late_at, "lr/learning_rate"), found.report()
    assert "a race in the TF1 training step" not in found.report()


def test_a_race_whose_read_cannot_be_kept_is_named_where_the_golden_read_the_moved_counter(tf2, goldens):
    opaque = goldens[2]
    with tracekit.open(opaque) as golden:
        assert [r["lr"] for r in golden.meta["races"]] == ["lr/learning_rate"]
        assert any("does not pass the counter's value on" in w for w in golden.meta["warnings"])
    assert _reads(opaque) == [None] * STEPS
    result = _compare(tf2, opaque)
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == (_moved(opaque)[0], "lr/learning_rate"), result.report()
    assert [h.code for h in result.slips] == [LR_RACE]
    assert "a race in the TF1 training step" in result.report()


def test_localize_excuses_the_raced_steps_and_calls_nothing_drift(tf2, goldens):
    # the correct port from its own state fails where TF1 raced; each step forced from the golden's state
    # fails there too, and the golden's race report and its rates say why: excused, with the evidence. The
    # last step has no next step whose rate would show it, nor does a golden late at every step (a port a
    # step behind looks the same): not excused, and the race is named there. (A golden whose read was
    # not kept: one that keeps it is fed it, and nothing is left to excuse.)
    racy = goldens[2]

    def make_port():
        variables, step = _port(tf2.tf)
        return None, step, {"variables": variables}
    found = tf2.localize(racy, make_port)
    moved = _moved(racy)
    shown = any(k not in moved for k in range(STEPS - 1))  # a step shows the port's schedule is TF1's
    excused = [k for k in moved if k < STEPS - 1] if shown else []
    assert [r.step for r in found.state.raced] == excused, found.report()
    text = found.report()
    for k in excused:
        assert "step %d excused: a race in the TF1 step, which read global_step:0 after its increment" % k in text
    first = next((k for k in moved if k not in excused), None)  # late everywhere, or at the last step: unverified
    if first is None:
        assert found.ok and "follows the race at step %d" % moved[0] in text, text
    else:
        assert (found.step, found.key) == (first, "lr/learning_rate") and "a race in the TF1 training step" in text
    assert "is drift" not in text
    # the port's rate is applied where its Keras optimizer applies the gradients
    assert "port test_race.py:%d `optimizer.apply_gradients(" % _applied_line() in text or found.ok


def _applied_line():
    with open(__file__) as handle:
        return next(n for n, line in enumerate(handle, 1) if "optimizer.apply_gradients([(tape.gradient(loss, w), w)])"
                    in line)


def test_localize_on_a_racy_golden_still_finds_the_ports_own_error(tf2, goldens):
    racy = goldens[2]

    def make_port():  # the schedule's initial rate twice TF1's: every step departs, raced or not
        w = tf2.tf.Variable(tf2.tf.ones([3, 1]), name="w")
        optimizer = tf2.tf.keras.optimizers.SGD(tf2.tf.keras.optimizers.schedules.ExponentialDecay(0.2, 1, 0.5, True))

        @tf2.tf.function
        def step(inputs):
            with tf2.tf.GradientTape() as tape:
                loss = tf2.tf.reduce_mean(tf2.tf.square(tf2.tf.matmul(inputs["x:0"], w)))
            optimizer.apply_gradients([(tape.gradient(loss, w), w)])
            return {"loss": loss}
        return None, step, {"variables": [w]}
    found = tf2.localize(racy, make_port)
    # its rates are no step's of TF1's schedule: no step is excused, its first is the port's error
    assert found.step == 0 and found.state.raced == [], found.report()


def _racy_gradient_port(tf):
    """racy_gradient.py in Keras, correct: its step takes the gradients from the state it starts from."""
    model = tf.keras.Sequential([tf.keras.layers.Dense(256, activation="tanh", name="h1"),
                                 tf.keras.layers.Dense(256, activation="tanh", name="h2"),
                                 tf.keras.layers.Dense(1, name="out")])
    model.build((None, 32))
    optimizer = tf.keras.optimizers.SGD(0.05)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(inputs["x:0"]) - inputs["y:0"]))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}
    return model, step


@pytest.mark.parametrize("ordered", [False, True])
def test_a_gradient_race_far_past_any_tolerance_is_named_with_the_ordering_that_removes_it(legacy_python, tmp_path,
                                                                                           ordered):
    # the gradients of the first layers read kernels their updates change in the same TF1 run,
    # unordered (ungated tf.gradients); how far that moved them is measured when recorded. A
    # correct port, forced from the golden's state: where the race moved a gradient past what a
    # tolerance absorbs, it departs there and the hint says so and how to record without the race
    # (never "a tolerance rule"); where it did not, it matches. Recorded with the updates ordered
    # after the gradients, the port matches.
    import tensorflow as tf

    from tracekit.comparison.slips import READ_RACE
    from tracekit.store.raced import ABSORBED

    path = str(tmp_path / "racy_gradient.h5")
    run_python(legacy_python, ["-m", "tracekit", "record", "-o", path, "--", os.path.join(SCRIPTS, "racy_gradient.py"),
                               "--steps", "4"] + (["--ordered"] if ordered else []), cwd=ROOT)
    model, step = _racy_gradient_port(tf)
    result = tracekit.tf2.check(path, step, model=model, forcing="state")
    with tracekit.open(path) as trace:
        effects = {key: e["effect"] for key, e in (trace.meta.get("race_effects") or {}).items()}
    if ordered or max(effects.values()) <= ABSORBED:
        assert result.ok, result.report()
        return
    assert not result.ok and result.first_divergence.kind == "grad"
    hint, = [h for h in result.slips if h.code == READ_RACE]
    assert hint.evidence["effect"] == effects[result.first_divergence.key] or \
        effects.get(result.first_divergence.key, 0) <= ABSORBED
    text = result.report()
    assert "no tolerance absorbs that" in text and "tf.control_dependencies(grads)" in text
    assert "tolerance rule" not in text.split("hint: a race")[1]
