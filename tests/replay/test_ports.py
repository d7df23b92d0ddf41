"""The TF2 ports of the three shipped goldens replay against the TF 1.15 recordings and pass;
deliberately wrong ports are caught at the right step, stage and tensor."""

from __future__ import annotations

import pytest

import tracekit
from tools.ports import estimator_model, estimator_shim, seed_example, slim_resnet

from ..support import golden
from ..support.stats_oracle import same_as_oracle

# Step 0 must match at the guide's single-step tolerance (float32 round-off); later steps
# accumulate round-off through the optimizer, so they get a training tolerance, still far
# inside the guide's (loss atol=1e-5 for 10 steps, then rtol=0.05).
TRAINING = tracekit.Tolerance.training()
FIRST_STEP_ONLY = tracekit.Tolerance().rule(steps=(1, None), ignore=True)

PORTS = {
    "seed_example (tf.function)": ("seed_example", seed_example.make, {}),
    "seed_example (eager)": ("seed_example", seed_example.make, {"eager": True}),
    "estimator_model (Keras)": ("estimator_model", estimator_model.make, {}),
    "estimator_model (shim)": ("estimator_model", estimator_shim.make, {}),
    "slim_resnet (Keras)": ("slim_resnet", slim_resnet.make, {}),
}


@pytest.mark.tracekit(tolerance=TRAINING)
@pytest.mark.parametrize("port", list(PORTS))
def test_port_replays_its_golden(tracekit_replay, port):
    # The plugin replays and compares with the marker's tolerance, failing with the first divergence.
    name, make, options = PORTS[port]
    model, step = make(**options)
    result = tracekit_replay(name, step, model=model)
    actual = tracekit_replay.actual
    first = tracekit.compare(golden(name), actual, FIRST_STEP_ONLY)
    assert first.ok, first.report()
    assert result.profile.name == "given" and result.tolerance is TRAINING
    kinds = {errors.kind for errors in result.max_errors()}
    assert {"input", "loss", "lr", "grad", "var"} <= kinds
    if name != "slim_resnet":
        assert "tap" in kinds
    if name == "estimator_model":
        assert "random" in kinds and "slot" in kinds
        assert result.tensor("loss", "regularization").steps == 50
    assert not result.slips and not result.conventions, result.report()  # no hint fires on a correct port
    assert actual.meta["replay"]["steps"] == len(actual)
    # Every variable matched by its name, none left to order (which can pair the wrong ones).
    assert "order" not in set(actual.meta["replay"]["matched_by"].values())
    same_as_oracle(golden(name), actual, TRAINING)  # the fast statistics are the float64 ones


WRONG = {
    "Keras Adam epsilon 1e-7 (TF1: 1e-8)": ("estimator_model", estimator_model.make, {"epsilon": 1e-7}, {},
                                           (0, "var", "hidden/kernel:0")),
    "regularization loss left out": ("estimator_model", estimator_model.make, {"regularization": False}, {},
                                     (0, "loss", "loss")),
    "batch-norm momentum 0.99 (TF1: 0.9)": ("estimator_model", estimator_model.make, {"bn_momentum": 0.99}, {},
                                           (0, "var", "bn/moving_mean:0")),
    "loss summed, not averaged": ("seed_example", seed_example.make, {"reduction": "sum"}, {},
                                  (0, "loss", "loss")),
    "learning-rate schedule one step off": ("seed_example", seed_example.make, {"lr_shift": 1}, {},
                                            (0, "lr", "learning_rate")),
    "dropout left to TF2's own randomness": ("estimator_model", estimator_model.make, {}, {"random": "none"},
                                             (0, "random", "dropout/dropout/random_uniform/RandomUniform:0")),
    "relu where TF1 had none": ("seed_example", seed_example.make, {"activation": "relu"}, {},
                                (0, "tap", "layer1")),
}


NAMED = {  # the wrong ports whose update at step 0 (from the golden's state) a named cause fits
    "Keras Adam epsilon 1e-7 (TF1: 1e-8)": "named cause: the optimizer's epsilon",
    "batch-norm momentum 0.99 (TF1: 0.9)": "named cause: the rate of a moving average",
}
HINTS = {  # what the others' reports say (None: no known slip fits a wrong activation)
    "regularization loss left out": "hint: the regularization loss is left out. At step 0, loss/loss is",
    "loss summed, not averaged": "hint: the loss is summed over the batch where the golden averaged it",
    "learning-rate schedule one step off": "hint: the learning-rate schedule is one step ahead",
    "dropout left to TF2's own randomness": "the replay ran with random='none'",
    "relu where TF1 had none": None,
}


@pytest.mark.parametrize("case", list(WRONG))
def test_wrong_port_is_caught_where_it_departs(tf2, case):
    name, make, options, replay_options, expected = WRONG[case]
    model, step = make(**options)
    actual = tf2.replay(golden(name), step, model=model, steps=3, **replay_options)
    result = tracekit.compare(golden(name), actual, TRAINING)
    d = result.first_divergence
    assert not result.ok and (d.step, d.kind, d.name) == expected, result.report()
    assert "first divergence: step %d, %s/%s" % expected in result.report()
    # each usual slip is named, with its evidence, for its port and only for it
    report = result.report()
    hints = [line for line in report.splitlines() if line.startswith(("hint:", "possible cause:"))]
    if case in NAMED:  # step 0 started from the golden's state: the verified fit says it, not the hint's guess
        assert hints == [] and NAMED[case] in report, report
    else:
        assert hints == ([] if HINTS[case] is None else hints[:1]) and len(hints) <= 1, report
        if HINTS[case] is not None:
            assert HINTS[case] in hints[0], report
    if case.startswith("Keras Adam epsilon"):  # the update's epsilon, fitted from the numbers
        assert 5e-8 < result.fingerprints[0].port < 2e-7, report
    for tolerance in (TRAINING, None):  # the fast statistics are the float64 ones
        same_as_oracle(golden(name), actual, tolerance)
