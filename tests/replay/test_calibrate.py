"""tracekit.tf2.calibrate and `tracekit calibrate`: a tolerance measured from how far the model's
own training moves from a start one ulp off. The correct port of a bias before batch norm under
Adam passes under it with no rule written by hand; the wrong ports still fail where they depart."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

import tracekit
from tracekit.cli import main
from tracekit.comparison.calibration import CAP_ULPS
from tracekit.comparison.tolerance import TRAINING_ULPS
from tracekit.replay.options import ReplayOptions
from tracekit.tf2.drive import _replay
from tools.ports import estimator_model, keras_fit, rnn_model, seed_example

from ..support import ROOT, golden
from .test_ports import WRONG


@pytest.fixture(scope="module")
def fit_calibration(tf2):
    return tf2.calibrate(golden("keras_fit"), keras_fit.make, runs=3)


def test_a_bias_before_batch_norm_under_adam_passes_calibrated_without_hand_rules(fit_calibration, tf2, tmp_path):
    found = fit_calibration
    assert found.ok, found.report()  # the port itself, under the calibrated tolerance
    # without it the default tolerance fails on the bias (tests/replay/test_keras_fit.py)
    model, step = keras_fit.make()
    assert not tf2.check(golden("keras_fit"), step, model=model, tolerance="default").ok
    # the bias, whose gradient is round-off, and what Adam makes of it: beyond any bound
    refused = {u.key for u in found.derived.unbounded}
    assert {"var/hidden/bias:0", "grad/hidden/bias:0"} <= refused, found.report()
    chain = ("hidden/bias:0", "hidden/bias/m:0", "hidden/bias/v:0", "moving_mean:0")
    assert all(key.endswith(chain) for key in refused)
    assert found.tolerance.accept_noise and "refused past the cap: var/hidden/bias:0" in found.report()
    # a stable tensor stays at the floor; nothing exceeds the cap
    assert found.tolerance.resolve("var", "hidden/kernel:0", 10, "float32").ulps == TRAINING_ULPS["var"]
    assert max(b.ulps for b in found.derived.bounds) == CAP_ULPS
    # the TOML reads back, and the port passes under the file too
    path = found.save(str(tmp_path / "keras_fit.toml"))
    text = open(path).read()
    head = text.splitlines()
    assert head[0].startswith("# calibrated by tracekit.tf2.calibrate") and head[0].endswith(golden("keras_fit"))
    assert head[1].startswith("# on TensorFlow 2.") and "# refused past the cap (held there, accept_noise): " \
        "var/hidden/bias:0 from step 1" in text
    loaded = tracekit.Tolerance.load(path)
    assert loaded.to_dict() == found.tolerance.to_dict()
    model, step = keras_fit.make()
    assert tf2.check(golden("keras_fit"), step, model=model, tolerance=loaded).ok
    data = json.loads(json.dumps(found.to_dict(), allow_nan=False))
    assert data["ok"] and data["runs"] == 3 and data["steps"] == 16 and data["port"]["verdict"] == "MATCH"


@pytest.mark.parametrize("options, expected", [
    ({"epsilon": 1e-8}, (0, "var/hidden/kernel:0")),
    ({"bn_momentum": 0.9}, (0, "var/bn/moving_mean:0")),
    ({"bn_momentum": 0.999}, (0, "var/bn/moving_mean:0")),
    ({"dropout": 0.5}, (0, "loss/loss")),
])
def test_wrong_fit_ports_still_fail_under_it(fit_calibration, tf2, options, expected):
    model, step = keras_fit.make(**options)
    result = tf2.check(golden("keras_fit"), step, model=model, tolerance=fit_calibration.tolerance)
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == expected, result.report()


@pytest.fixture(scope="module")
def calibrated(tf2):
    """The correct port's calibrated tolerance, per golden of the wrong ports."""
    return {name: tf2.calibrate(golden(name), make, runs=2)
            for name, make in {case[0]: case[1] for case in WRONG.values()}.items()}


@pytest.mark.slow
def test_correct_ports_pass_and_every_wrong_port_fails_calibrated(calibrated, tf2):
    for name, found in calibrated.items():
        assert found.ok, found.report()  # the correct port, all its steps
    for case, (name, make, options, replay_options, (step, kind, tensor)) in WRONG.items():
        model, port = make(**options)
        result = tf2.check(golden(name), port, model=model, tolerance=calibrated[name].tolerance, steps=3,
                           **replay_options)
        first = result.first_divergence
        assert not result.ok and (first.step, first.key) == (step, "%s/%s" % (kind, tensor)), (case, result.report())


def test_calibration_is_reproducible_and_follows_the_margin(tf2):
    port = functools.partial(estimator_model.make)
    one = tf2.calibrate(golden("estimator_model"), port, runs=1, steps=6)
    again = tf2.calibrate(golden("estimator_model"), port, runs=1, steps=6)
    assert one.spread.deviation == again.spread.deviation  # seeded starts, one machine: bit for bit
    assert one.spread.runs == 1 and one.spread.steps == 6 and one.ok
    assert any(v > 0 for by_step in one.spread.deviation.values() for v in by_step.values())
    wide = tf2.calibrate(golden("estimator_model"), port, runs=1, steps=6, margin=1e6)
    assert wide.derived.unbounded and wide.tolerance.accept_noise  # 1e6 x any deviation passes the cap


def test_the_perturbed_start_moves_each_nonzero_element_one_ulp(tf2, tmp_path):
    model, step = seed_example.make()
    options = ReplayOptions(model=model, steps=1)
    with _replay(golden("seed_example"), step, options, str(tmp_path / "n.h5"), nudge=3).trace as nudged, tracekit.open(golden("seed_example")) as g:
        assert nudged.meta["replay"]["nudge"] == 3
        moved = []
        for name in nudged.initial.names("var"):  # the port's variables (no global step)
            before, after = g.initial["var", name], nudged.initial["var", name]
            assert np.array_equal(after[before == 0], before[before == 0])  # zeros stay
            step_up = np.nextafter(before, np.float32(np.inf)) == after
            step_down = np.nextafter(before, np.float32(-np.inf)) == after
            assert np.all((step_up | step_down)[before != 0]), name
            moved += list(np.sign(after - before)[before != 0])
        assert 0.4 < moved.count(1) / len(moved) < 0.6  # up or down at random


def lstm_port():
    model, step = rnn_model.make("lstm")
    return model, step, {"convert": rnn_model.conversions(model, "lstm")}  # options naming the port's objects


def test_a_port_may_bring_replay_options_that_name_its_objects(tf2):
    found = tf2.calibrate(golden("lstm_model"), lstm_port, runs=1, steps=4)
    assert found.ok and ("var", "rnn/lstm_cell/kernel:0") in found.spread.deviation, found.report()
    with pytest.raises(tracekit.UsageError, match="given both by make_port"):
        tf2.calibrate(golden("lstm_model"), lstm_port, runs=1, steps=1, convert=())
    with pytest.raises(tracekit.UsageError, match=r"must return \(model, step function\).*got RNNModel"):
        tf2.calibrate(golden("lstm_model"), lambda: rnn_model.make("lstm")[0], runs=1)
    with pytest.raises(tracekit.UsageError, match="got a tuple of 4"):
        tf2.calibrate(golden("lstm_model"), lambda: lstm_port() + (None,), runs=1)
    for returned in ({"forcing": "taps"}, {"model": None}, {"strides": 2}):  # checked as the caller's options are
        with pytest.raises(tracekit.UsageError, match="the replay options make_port.. returned: cannot pass on"):
            tf2.calibrate(golden("lstm_model"), lambda: rnn_model.make("lstm") + (returned,), runs=1)


@pytest.mark.parametrize("arguments, message", [
    ({"runs": 0}, "runs must be a whole number"),
    ({"runs": 2.5}, "runs must be a whole number"),
    ({"margin": 0.5}, "margin must be a finite number >= 1"),
    ({"margin": float("inf")}, "margin must be a finite number >= 1"),
    ({"forcing": "state"}, "it replays without forcing"),
    ({"strides": 2}, "cannot pass on option.s. strides"),
    ({"model": None}, "cannot pass on option.s. model"),
])
def test_bad_arguments_say_what_to_give(tf2, arguments, message):
    with pytest.raises(tracekit.UsageError, match=message):
        tf2.calibrate(golden("seed_example"), estimator_model.make, **arguments)


def test_the_command_line_writes_the_tolerance(tf2, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(ROOT)
    out = str(tmp_path / "fit.toml")
    assert main(["calibrate", golden("keras_fit"), "tools.ports.keras_fit:make", "--runs", "1", "-o", out]) == 0
    captured = capsys.readouterr()
    assert "the port against the golden under it: MATCH" in captured.out and "wrote %s" % out in captured.err
    assert tracekit.Tolerance.load(out).accept_noise
    model, step = keras_fit.make()
    actual = str(tmp_path / "actual.h5")
    tf2.replay(golden("keras_fit"), step, model=model, out=actual).close()
    assert main(["diff", golden("keras_fit"), actual, "--tolerance", out]) == 0  # the port passes under the file
    assert main(["diff", golden("keras_fit"), actual, "--profile", "default"]) == 1  # and needs it
    capsys.readouterr()
    assert main(["calibrate", golden("seed_example"), "tools.ports.seed_example:make", "--runs", "1", "--steps", "2",
                 "--json", "-o", out]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["steps"] == 2 and data["runs"] == 1 and data["unbounded"] == []
    assert main(["calibrate", golden("seed_example"), "tools.ports.seed_example:make", "--runs", "0"]) == 2
    assert main(["calibrate", golden("seed_example"), "no_such_module:make"]) == 2


def test_a_drift_replay_moves_its_state_and_gradients_by_an_eps_of_their_scale(tf2):
    # The drift envelope's replays: after every step each variable, and in every step each
    # gradient taken, moved by up to one eps of its tensor's scale (and the rounding of the sum:
    # half an ulp of the element), zeros kept, other draws at each step.
    from tracekit.tf2.perturb import GradientJitter, Jitter

    tf = tf2.tf
    rng = np.random.RandomState(0)
    start = rng.randn(64, 8).astype(np.float32)
    start[0] = 0.0
    variable = tf.Variable(start)
    eps_scale = float(np.finfo(np.float32).eps) * float(np.abs(start).max())
    moves = []
    jitter = Jitter([variable])
    for seed in (1, 2):
        before = variable.numpy()
        jitter(seed)
        moved = variable.numpy() - before
        assert np.all(moved[0] == 0) and np.all(np.abs(moved) <= eps_scale * 1.5) and np.any(moved != 0)
        moves.append(moved)
    assert not np.array_equal(moves[0], moves[1])
    grads = GradientJitter(seed=5)
    grad = tf.constant(rng.randn(16, 4).astype(np.float32))
    sparse = tf.IndexedSlices(tf.constant(rng.randn(3, 4).astype(np.float32)), tf.constant([0, 2, 5]), [8, 4])
    first = grads([grad, sparse, None])
    assert first[2] is None and isinstance(first[1], tf.IndexedSlices)
    bound = float(np.finfo(np.float32).eps) * float(np.abs(grad.numpy()).max()) * 1.5
    assert 0 < np.abs(first[0].numpy() - grad.numpy()).max() <= bound
    assert np.array_equal(first[1].indices.numpy(), [0, 2, 5])
    assert np.array_equal(grads([grad])[0].numpy(), first[0].numpy())  # the same step: the same draw
    grads.step()
    assert not np.array_equal(grads([grad])[0].numpy(), first[0].numpy())


def test_a_large_tensor_moves_by_a_repeated_block_of_draws(tf2):
    # Past perturb.BLOCK elements the draws repeat every BLOCK elements (a draw per element cost as
    # much as a large model's step); each element still moves within its eps of scale (a variable's
    # zeros kept).
    from tracekit.tf2.perturb import BLOCK, GradientJitter, Jitter

    tf = tf2.tf
    start = np.random.RandomState(1).randn(3, BLOCK + 7).astype(np.float32)
    start[1, 5] = 0.0
    variable = tf.Variable(start)
    bound = float(np.finfo(np.float32).eps) * float(np.abs(start).max()) * 1.5
    for moved in (GradientJitter(seed=3)([tf.constant(start)])[0].numpy() - start,
                  _jittered(Jitter([variable]), variable, start)):
        flat = moved.ravel()
        assert 0 < np.abs(flat).max() <= bound
        assert np.count_nonzero(flat[BLOCK:2 * BLOCK]) > BLOCK // 2  # past the first block too
        # elements BLOCK apart moved alike (round-off of the sum aside), neighbours not
        both = (start.ravel()[:BLOCK] != 0) & (start.ravel()[BLOCK:2 * BLOCK] != 0)
        ulp = np.spacing(np.abs(start.ravel()[:2 * BLOCK])).max()
        assert np.abs(flat[:BLOCK][both] - flat[BLOCK:2 * BLOCK][both]).max() <= 2 * ulp
        assert not np.allclose(flat[:BLOCK - 1], flat[1:BLOCK], atol=ulp)


def _jittered(jitter, variable, start):
    jitter(9)
    moved = variable.numpy() - start
    assert moved[1, 5] == 0
    return moved
