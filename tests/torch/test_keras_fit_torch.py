"""A PyTorch port of the TF1 Keras fit example (goldens/keras_fit.h5, recorded on TF 1.15):
Dense, BatchNormalization, ReLU, Dropout fed the golden's draws, Dense, under Adam. The port
written with TF's forms (tools/ports/torch/tf_forms.py) matches; the torch defaults a port
slips on are caught at their step."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tools.ports.torch import keras_fit
from tracekit.comparison.adam_l2 import ADAM_L2
from tracekit.comparison.corrected import BESSEL, EPSILON_HAT
from tracekit.comparison.fingerprints import AVERAGE_RATE, EPSILON
from tracekit.torch.settings import BN_EPSILON

from ..support import golden


def _check(tt, tolerance=None, **port):
    model, step, own = keras_fit.make(**port)
    return tt.check(golden("keras_fit"), step, model=model, tolerance=tolerance, **own)


def test_a_port_with_tfs_forms_matches(tt, tmp_path):
    out = str(tmp_path / "actual.h5")
    result = _check(tt, "training")
    assert result.ok and result.steps == 16, result.report()
    # Only the dense bias before batch norm, whose gradient is round-off that Adam amplifies, and
    # what it feeds, need the training preset: everything else matches at the default tolerance.
    strict = _check(tt)
    assert {n.key for n in strict.noise} <= {"var/hidden/bias:0", "var/bn/moving_mean:0"}, strict.report()
    assert all(t.ok for t in strict.tensors if t.key not in {n.key for n in strict.noise}), strict.report()
    assert {"input", "random", "loss", "lr", "grad", "var", "slot"} <= {t.kind for t in strict.tensors}
    # The initial state as loaded reads back as the golden's, bit for bit, in the golden's layout.
    model, step, own = keras_fit.make()
    actual = tt.replay(golden("keras_fit"), step, model=model, out=out, steps=2, **own)
    with tracekit.open(golden("keras_fit")) as g:
        for name in ("hidden/kernel:0", "logits/kernel:0", "bn/moving_variance:0"):
            assert np.array_equal(actual.initial["var", name], g.initial["var", name]), name
        # dropout took the golden's uniform draw, as recorded
        draw = g.names("random")[0]
        assert np.array_equal(actual.step(0)["random", draw], g.step(0)["random", draw])
    mapping = actual.meta["replay"]["mapping"]
    assert mapping["hidden/kernel:0"] == "hidden.weight" and mapping["bn/moving_variance:0"] == "bn.running_var"
    assert actual.meta["torch"]["version"] and "tensorflow" not in actual.meta


def test_without_the_golden_draws_the_loss_departs_at_the_first_step(tt):
    model, step, own = keras_fit.make()
    off = tt.check(golden("keras_fit"), step, model=model, random="none", **own)
    assert (off.first_divergence.step, off.first_divergence.key) == (0, "loss/loss"), off.report()


@pytest.mark.parametrize("port, expected, cause", [
    # torch's own Adam: epsilon added to sqrt(v_hat), where TF adds it before the bias correction
    ({"optimizer": "torch"}, (0, "var/hidden/kernel:0"), EPSILON_HAT),
    # nn.BatchNorm1d: the running variance with Bessel's correction, Keras' without
    ({"batch_norm": "torch"}, (0, "var/bn/moving_variance:0"), BESSEL),
    # Keras' momentum given to torch, whose momentum is 1 - Keras'
    ({"bn_momentum": 0.99}, (0, "var/bn/moving_mean:0"), AVERAGE_RATE),
    # TF1 AdamOptimizer's default epsilon, not Keras' 1e-7
    ({"epsilon": 1e-8}, (0, "var/hidden/kernel:0"), EPSILON),
    # the golden's draws, another keep threshold: caught at the loss, nothing to fit
    ({"dropout": 0.5}, (0, "loss/loss"), None),
    # torch's Adam(weight_decay=): an L2 term added inside the step, after the .grad the replay reads
    ({"optimizer": "torch", "weight_decay": 0.01}, (0, "var/hidden/kernel:0"), ADAM_L2),
    # torch's BatchNorm epsilon, not Keras' 1e-3: the loss departs first (no tap of the layer), named
    # by replaying step 0 with the module's eps at Keras'
    ({"bn_eps": 1e-5}, (0, "loss/loss"), BN_EPSILON),
])
def test_slips_are_caught_where_they_depart_and_named(tt, port, expected, cause):
    result = _check(tt, "training", **port)
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == expected, result.report()
    named = {hint.code for hint in result.fingerprints}
    assert named == ({cause} if cause else set()), result.report()
    if cause == BN_EPSILON:
        assert "where it adds eps=0.001" in result.report() and result.fingerprints[0].detail["setting"] == \
            "BatchNorm module bn", result.report()
    if cause == ADAM_L2:  # the coefficient passed, with torch's epsilon place, on every variable failing at the step
        hint = result.fingerprints[0]
        assert hint.port == port["weight_decay"] and hint.detail["after_correction"] == 1, result.report()
        failing = {t.key for t in result.tensors if t.kind == "var" and not t.by_step[0].ok}
        # but the dense bias before batch norm: its gradient is round-off, which Adam makes a unit step of
        assert failing - {"var/hidden/bias:0"} == set(hint.keys), result.report()


def test_a_var_map_names_torch_parameters_and_tensors(tt):
    model, step, own = keras_fit.make()
    var_map = {"hidden/kernel:0": "hidden.weight", "logits/kernel:0": model.logits.weight}
    actual = tt.replay(golden("keras_fit"), step, model=model, var_map=var_map, steps=1, **own)
    assert actual.meta["replay"]["matched_by"]["hidden/kernel:0"] == "explicit"
    assert actual.meta["replay"]["mapping"]["logits/kernel:0"] == "logits.weight"


def test_a_port_that_does_not_pair_is_stopped_naming_both_sides(tt):
    import torch

    model, step, own = keras_fit.make()
    model.extra = torch.nn.Linear(2, 2)
    with pytest.raises(tracekit.ReplayError) as caught:
        tt.replay(golden("keras_fit"), step, model=model, steps=1, **own)
    message = str(caught.value)
    assert "the PyTorch variables do not match the golden's" in message
    assert "only in PyTorch: extra.weight (as extra/kernel, transposed) (2, 2)" in message, message


def test_options_that_are_tensorflows_alone_or_contradict_are_refused(tt):
    with pytest.raises(tracekit.UsageError, match="not both"):
        tt.check(golden("keras_fit"), make_port=keras_fit.make, optimizer=object())
    with pytest.raises(tracekit.UsageError, match="writes no actual trace"):
        tt.check(golden("keras_fit"), make_port=keras_fit.make, judge="local", out="x.h5")
    model, step, own = keras_fit.make()
    with pytest.raises(tracekit.UsageError, match="determinism is TensorFlow's"):
        tt.replay(golden("keras_fit"), step, model=model, determinism=True, **own)
    with pytest.raises(tracekit.UsageError, match="optimizer="):
        tt.replay(golden("keras_fit"), step, model=model)


def test_teacher_forced_the_port_matches_and_the_state_it_set_reads_back(tt):
    result = _check(tt, "training", **{})
    model, step, own = keras_fit.make()
    forced = tt.check(golden("keras_fit"), step, model=model, tolerance="training", forcing="state", **own)
    assert forced.ok and forced.forcing == "state" and result.ok, forced.report()
    # what forcing set at its first step is read back as the golden's: variables, Adam's slots, the step count
    assert forced.forced["set"]["var"] == 8 and forced.forced["set"]["slot"] == 13, forced.forced
    model, step, own = keras_fit.make(optimizer="torch")
    wrong = tt.check(golden("keras_fit"), step, model=model, tolerance="training", forcing="state", **own)
    assert not wrong.ok and wrong.first_divergence.step == 0, wrong.report()


def test_calibrate_measures_the_ports_own_round_off_from_starts_one_ulp_off(tt, tmp_path):
    # as for the TF2 port (tests/replay/test_calibrate.py): the bias before batch norm, whose
    # gradient is round-off Adam amplifies, grows past any bound from a start one ulp off; the port
    # passes under what was measured, with no rule written by hand
    found = tt.calibrate(golden("keras_fit"), keras_fit.make, runs=2)
    assert found.ok and found.spread.runs == 2, found.report()
    refused = {u.key for u in found.derived.unbounded}
    assert {"var/hidden/bias:0", "grad/hidden/bias:0"} <= refused, found.report()
    assert found.tolerance.resolve("var", "logits/kernel:0", 10, "float32").ulps < 131072
    head = open(found.save(str(tmp_path / "fit.toml"))).read().splitlines()
    assert head[0].startswith("# calibrated by tracekit.torch.calibrate") and head[1].startswith("# on PyTorch 2.")
