"""A JAX (flax with optax) port of the TF1 Keras fit example (goldens/keras_fit.h5, recorded on
TF 1.15): Dense, BatchNorm, ReLU, Dropout fed the golden's draws, Dense, under Adam, in a jitted
functional step on a flax TrainState. The port written with TF's Adam (tools/ports/jax/tf_forms.py)
matches; the optax and flax defaults a port slips on are caught at their step."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tools.ports.jax import keras_fit
from tracekit.comparison.adam_l2 import ADAM_L2
from tracekit.comparison.corrected import EPSILON_HAT
from tracekit.comparison.fingerprints import AVERAGE_RATE

from ..support import golden


def _check(tj, tolerance=None, **port):
    state, step = keras_fit.make(**port)
    return tj.check(golden("keras_fit"), step, state=state, tolerance=tolerance)


def test_a_port_with_tfs_adam_matches(tj, tmp_path):
    result = _check(tj, "training")
    assert result.ok and result.steps == 16, result.report()
    # As for the TF2 and PyTorch ports: only the dense bias before batch norm, whose gradient is
    # round-off that Adam amplifies, and what it feeds need the training preset.
    strict = _check(tj)
    assert {n.key for n in strict.noise} <= {"var/hidden/bias:0", "var/bn/moving_mean:0"}, strict.report()
    assert all(t.ok for t in strict.tensors if t.key not in {n.key for n in strict.noise}), strict.report()
    assert {"input", "random", "loss", "lr", "grad", "var", "slot"} <= {t.kind for t in strict.tensors}
    actual = loaded_as_golden(tj, *keras_fit.make(), tmp_path)
    mapping = actual.meta["replay"]["mapping"]
    assert mapping["hidden/kernel:0"] == "params/hidden/kernel"
    assert mapping["bn/gamma:0"] == "params/bn/scale" and mapping["bn/moving_variance:0"] == "batch_stats/bn/var"
    assert actual.meta["jax"]["version"] and "tensorflow" not in actual.meta and "torch" not in actual.meta


def loaded_as_golden(tj, state, step, tmp_path):
    """A Keras fit port's replay of two steps, its initial state as loaded read back as the
    golden's, bit for bit, and its dropout having taken the golden's draw."""
    actual = tj.replay(golden("keras_fit"), step, state=state, out=str(tmp_path / "actual.h5"), steps=2)
    with tracekit.open(golden("keras_fit")) as g:
        for name in ("hidden/kernel:0", "bn/gamma:0", "bn/moving_variance:0", "training/Adam/hidden/kernel/m:0"):
            kind = "slot" if "/Adam/" in name else "var"
            assert np.array_equal(actual.initial[kind, name], g.initial[kind, name]), name
        draw = g.names("random")[0]
        assert np.array_equal(actual.step(0)["random", draw], g.step(0)["random", draw])
    return actual


def test_without_the_golden_draws_the_loss_departs_at_the_first_step(tj):
    state, step = keras_fit.make()
    off = tj.check(golden("keras_fit"), step, state=state, random="none")
    assert (off.first_divergence.step, off.first_divergence.key) == (0, "loss/loss"), off.report()


@pytest.mark.parametrize("port, expected, cause", [
    # optax.adam: epsilon added to sqrt(nu_hat), where TF adds it before the bias correction
    ({"optimizer": "optax"}, (0, "var/hidden/kernel:0"), EPSILON_HAT),
    # flax's BatchNorm epsilon (1e-5), not Keras' 1e-3
    ({"bn_epsilon": 1e-5}, (0, "loss/loss"), None),
    # a momentum of 0.9 for the moving averages, not Keras' 0.99
    ({"bn_momentum": 0.9}, (0, "var/bn/moving_mean:0"), AVERAGE_RATE),
    # another keep threshold on the golden's draws: caught at the loss, nothing to fit
    ({"dropout": 0.5}, (0, "loss/loss"), None),
    # optax.add_decayed_weights chained before Adam: an L2 term inside the optimizer, after the
    # gradients the replay reads
    ({"optimizer": "optax", "weight_decay": 0.01}, (0, "var/hidden/kernel:0"), ADAM_L2),
])
def test_slips_are_caught_where_they_depart_and_named(tj, port, expected, cause):
    result = _check(tj, "training", **port)
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == expected, result.report()
    named = {hint.code for hint in result.fingerprints}
    assert named == ({cause} if cause else set()), result.report()
    if cause == ADAM_L2:  # the coefficient passed, with optax's epsilon place
        hint = result.fingerprints[0]
        assert hint.port == port["weight_decay"] and hint.detail["after_correction"] == 1, result.report()


def test_teacher_forced_the_port_matches_and_the_state_it_set_reads_back(tj):
    state, step = keras_fit.make()
    forced = tj.check(golden("keras_fit"), step, state=state, tolerance="training", forcing="state")
    assert forced.ok and forced.forcing == "state", forced.report()
    # what forcing set at its first step reads back as the golden's: variables, Adam's slots, the step count
    assert forced.forced["set"]["var"] == 8 and forced.forced["set"]["slot"] == 13, forced.forced
    state, step = keras_fit.make(optimizer="optax")
    wrong = tj.check(golden("keras_fit"), step, state=state, tolerance="training", forcing="state")
    assert not wrong.ok and wrong.first_divergence.step == 0, wrong.report()


def test_a_var_map_names_the_ports_paths(tj):
    state, step = keras_fit.make()
    actual = tj.replay(golden("keras_fit"), step, state=state, steps=1,
                       var_map={"hidden/kernel:0": "params/hidden/kernel"})
    assert actual.meta["replay"]["matched_by"]["hidden/kernel:0"] == "explicit"


def test_a_port_that_does_not_pair_is_stopped_naming_both_sides(tj):
    import jax.numpy as jnp

    state, step = keras_fit.make()
    params = dict(state.params, extra={"kernel": jnp.zeros((2, 2))})
    with pytest.raises(tracekit.ReplayError) as caught:
        tj.replay(golden("keras_fit"), step, state=state.replace(params=params), steps=1)
    message = str(caught.value)
    assert "the JAX variables do not match the golden's" in message
    assert "only in JAX: params/extra/kernel (as extra/kernel) (2, 2)" in message, message


def test_options_that_are_tensorflows_alone_or_contradict_are_refused(tj):
    state, step = keras_fit.make()
    with pytest.raises(tracekit.UsageError, match="not both"):
        tj.check(golden("keras_fit"), make_port=keras_fit.make, state=state)
    with pytest.raises(tracekit.UsageError, match="determinism is TensorFlow's"):
        tj.replay(golden("keras_fit"), step, state=state, determinism=True)
    with pytest.raises(tracekit.UsageError, match="train state"):
        tj.replay(golden("keras_fit"), step, state={"params": {}})
    with pytest.raises(tracekit.UsageError, match="judge must be one of"):
        tj.check(golden("keras_fit"), make_port=keras_fit.make, judge="drift")
    with pytest.raises(tracekit.UsageError, match="writes no actual trace"):
        tj.check(golden("keras_fit"), make_port=keras_fit.make, judge="local", out="x.h5")
    with pytest.raises(tracekit.UsageError, match="needs the port's factory"):
        tj.check(golden("keras_fit"), step, state=state, judge="local")


def test_flaxs_fast_variance_stays_within_round_off_on_this_golden(tj):
    # flax's default E[x^2] - E[x]^2 for the batch variance, where Keras subtracts the mean first: on this
    # golden's batches it differs by round-off only, so it is no slip here (docs/PORTS.md says so)
    result = _check(tj, "training", fast_variance=True)
    assert result.ok and {n.key for n in result.noise} <= {"var/hidden/bias:0", "var/bn/moving_mean:0"}, \
        result.report()


def test_calibrate_measures_the_ports_own_round_off_from_starts_one_ulp_off(tj, tmp_path):
    # as for the TF2 and PyTorch ports: the bias before batch norm grows past any bound from a start
    # one ulp off; the port passes under what was measured, with no rule written by hand
    found = tj.calibrate(golden("keras_fit"), keras_fit.make, runs=2)
    assert found.ok and found.spread.runs == 2, found.report()
    refused = {u.key for u in found.derived.unbounded}
    assert {"var/hidden/bias:0", "grad/hidden/bias:0"} <= refused, found.report()
    assert found.tolerance.resolve("var", "logits/kernel:0", 10, "float32").ulps < 131072
    head = open(found.save(str(tmp_path / "fit.toml"))).read().splitlines()
    assert head[0].startswith("# calibrated by tracekit.jax.calibrate") and head[1].startswith("# on JAX 0.")
