"""A TF1 LSTMCell (goldens/lstm_model.h5) ported to torch's nn.LSTM: the weights converted as data
(tracekit.torch.lstm: one kernel to weight_ih and weight_hh, the gate order, the forget bias TF1
adds at run time), gradients and Adam's slots of the converted weights compared in TF1's layout,
its taps too. The port matches, and so does a cell written out; the slips a torch port of TF1's cell
makes depart at step 0 and are named (the forget bias and the gate order by the step replayed with
the conversion read the other way)."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tools.ports.torch import rnn_model

from ..support import golden


def test_the_lstm_port_matches_teacher_forced_and_not(tt):
    for forcing in ("none", "state"):
        model, step, own = rnn_model.make()
        result = tt.check(golden("lstm_model"), step, model=model, forcing=forcing, **own)
        assert result.ok and result.steps == 20, result.report()
        kinds = {t.kind for t in result.tensors}
        assert {"tap", "loss", "grad", "var", "slot"} <= kinds, kinds
        # the converted weights' gradients and Adam's slots, compared in TF1's layout
        for key in ("grad/rnn/lstm_cell/kernel:0", "slot/rnn/lstm_cell/kernel/Adam_1:0", "var/rnn/lstm_cell/bias:0"):
            assert result.tensor(*key.split("/", 1)).ok, key


def test_a_cell_written_out_on_torchs_layout_matches(tt):
    model, step, own = rnn_model.make(cell="written")  # its gates split as torch lays them out: i, f, g, o
    result = tt.check(golden("lstm_model"), step, model=model, **own)
    assert result.ok and result.steps == 20 and result.tensor("grad", "rnn/lstm_cell/kernel:0").ok, result.report()


def test_the_loaded_weights_read_back_as_the_goldens(tt):
    model, step, own = rnn_model.make()
    actual = tt.replay(golden("lstm_model"), step, model=model, steps=1, **own)
    with tracekit.open(golden("lstm_model")) as g:
        for name in ("rnn/lstm_cell/kernel:0", "rnn/lstm_cell/bias:0"):
            assert np.array_equal(actual.initial["var", name], g.initial["var", name]), name
    # TF1's forget bias is in torch's bias: the f block of bias_ih is the golden's plus 1, bias_hh 0
    units = rnn_model.UNITS
    with tracekit.open(golden("lstm_model")) as g:
        kernel, bias = g.initial["var", "rnn/lstm_cell/kernel:0"], g.initial["var", "rnn/lstm_cell/bias:0"]
    w_ih, w_hh, b_ih, b_hh = own["convert"][0].values_to_port([kernel, bias])
    assert np.array_equal(b_ih[units:2 * units], bias[2 * units:3 * units] + np.float32(1.0))  # TF1: i, j, f, o
    assert not b_hh.any() and w_ih.shape == (4 * units, 3) and w_hh.shape == (4 * units, units)
    assert actual.meta["replay"]["converted"]["rnn/lstm_cell/kernel:0"].startswith("TF1 LSTMCell")


@pytest.mark.parametrize("slip, expected, causes", [
    # torch's two biases both trained: their sum moves twice as far as TF1's one bias, named as its
    # gradient twice TF1's
    ({"both_biases": True}, "grad/rnn/lstm_cell/bias:0", ["gradient-scale"]),
    # torch.optim.Adam: epsilon after the bias correction, named on the converted kernel's update
    ({"optimizer": "torch"}, "var/rnn/lstm_cell/kernel:0", ["epsilon-after-bias-correction"]),
    # TF1's forget bias, added at run time, left out of torch's bias: named by the step replayed with it
    ({"forget_bias": 0.0}, "tap/last_output", ["lstm-forget-bias"]),
    # a cell written out, splitting its gates as TF1's code does (i, j, f, o) on torch's layout (i, f, g,
    # o): named by the step replayed with TF1's blocks kept in their order
    ({"cell": "written-tf1-split"}, "tap/last_output", ["lstm-gate-order"]),
])
def test_the_lstm_slips_depart_at_step_0(tt, slip, expected, causes):
    model, step, own = rnn_model.make(**slip)
    result = tt.check(golden("lstm_model"), step, model=model, **own)
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == (0, expected), result.report()
    assert [f.code for f in result.fingerprints] == causes, result.report()
    if "lstm-" in " ".join(causes):  # claimed by a replay that matched, the conversion named
        assert "named cause, verified by a replay: %s, in TF1 LSTMCell rnn/lstm_cell -> torch " % causes[0] \
            in result.report(), result.report()
    if slip.get("both_biases"):  # one gradient of the four: not the loss's scale
        assert "on 1 of the golden's 4 gradients only" in result.report() and "counts 2 times" in result.report()


def test_a_torch_lstm_conversion_refuses_what_tf1s_cell_is_not(tt):
    import torch

    with pytest.raises(tracekit.UsageError, match="bias=False"):
        tt.lstm("rnn/lstm_cell", torch.nn.LSTM(3, 6, bias=False))
    with pytest.raises(tracekit.UsageError, match="nn.LSTM"):
        tt.lstm("rnn/lstm_cell", torch.nn.GRU(3, 6))
