"""A TF1 LSTMCell (goldens/lstm_model.h5) ported to flax's nn.RNN(nn.LSTMCell): the weights converted
as data (tracekit.jax.lstm: one kernel to a Dense per gate and side, the gate order, the forget bias
TF1 adds at run time), gradients and Adam's slots of the converted weights compared in TF1's layout,
its taps (inside the jitted step) too. The port matches, teacher-forced and not, taps forced too;
its slips depart at step 0."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tools.ports.jax import rnn_model

from ..support import golden


@pytest.mark.parametrize("forcing", ["none", "state", "taps"])
def test_the_lstm_port_matches(tj, forcing):
    state, step, own = rnn_model.make()
    result = tj.check(golden("lstm_model"), step, state=state, forcing=forcing, **own)
    assert result.ok and result.steps == 20, result.report()
    kinds = {t.kind for t in result.tensors}
    assert {"tap", "loss", "grad", "var", "slot", "lr"} <= kinds, kinds
    # the converted weights' gradients and Adam's slots, compared in TF1's layout, at every step (and the
    # state's initial values too)
    for key, steps in (("grad/rnn/lstm_cell/kernel:0", 20), ("slot/rnn/lstm_cell/kernel/Adam_1:0", 21),
                       ("var/rnn/lstm_cell/bias:0", 21), ("tap/last_output", 20)):
        tensor = result.tensor(*key.split("/", 1))
        assert tensor.ok and tensor.steps == steps, (key, tensor)


def test_the_loaded_weights_are_the_goldens_in_flaxs_layout(tj):
    state, step, own = rnn_model.make()
    actual = tj.replay(golden("lstm_model"), step, state=state, steps=1, **own)
    with tracekit.open(golden("lstm_model")) as g:
        kernel, bias = g.initial["var", "rnn/lstm_cell/kernel:0"], g.initial["var", "rnn/lstm_cell/bias:0"]
    units, inputs = rnn_model.UNITS, rnn_model.INPUTS
    ports = own["convert"][0].values_to_port([kernel, bias])
    # TF1's blocks i, j, f, o: flax's ig is TF1's j block of the input rows, hf's bias TF1's f block plus 1
    assert np.array_equal(ports[2], kernel[:inputs, units:2 * units])
    assert np.array_equal(ports[9], bias[2 * units:3 * units] + np.float32(1.0))
    assert actual.meta["replay"]["converted"]["rnn/lstm_cell/kernel:0"].startswith("TF1 LSTMCell")


@pytest.mark.parametrize("slip, expected, causes", [
    # optax.adam: epsilon after the bias correction, named on the converted kernel's update
    ({"optimizer": "optax"}, "var/rnn/lstm_cell/kernel:0", ["epsilon-after-bias-correction"]),
    # Keras' Adam epsilon 1e-7 where TF1's AdamOptimizer's is 1e-8
    ({"epsilon": 1e-7}, "var/rnn/lstm_cell/kernel:0", ["epsilon"]),
    # TF1's forget bias, added at run time, left out of flax's hf bias: named by the step replayed with it
    ({"forget_bias": 0.0}, "tap/last_output", ["lstm-forget-bias"]),
    # the sequence read backwards: caught, not named
    ({"reverse": True}, "tap/last_output", []),
])
def test_the_lstm_slips_depart_at_step_0(tj, slip, expected, causes):
    state, step, own = rnn_model.make(**slip)
    result = tj.check(golden("lstm_model"), step, state=state, **own)
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == (0, expected), result.report()
    assert [f.code for f in result.fingerprints] == causes, result.report()


def test_the_conversions_variants_read_their_own_values_back_as_the_goldens(tj):
    conv = rnn_model.make()[2]["convert"][0]
    with tracekit.open(golden("lstm_model")) as g:
        values = [g.initial["var", name] for name in conv.golden]
    for each in [conv] + [v.conversion for v in conv.variants()]:
        back = each.values_to_golden(each.values_to_port(values))
        assert np.array_equal(back[0], values[0]) and np.allclose(back[1], values[1], atol=2e-7, rtol=0), each


def test_a_conversion_naming_leaves_the_state_lacks_is_refused(tj):
    state, step, own = rnn_model.make()
    with pytest.raises(tracekit.UsageError, match="params/LSTM_9/ii/kernel"):
        tj.replay(golden("lstm_model"), step, state=state, convert=[tj.lstm("rnn/lstm_cell", "params/LSTM_9")])
