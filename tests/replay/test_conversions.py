"""Weight conversions: a Keras LSTM replays a TF1 LSTMCell golden (goldens/lstm_model.h5,
recorded on TF 1.15.5 by tools/goldens/lstm_model.py), compared in the golden's layout;
wrong ports are caught where they depart; a shape mismatch names the conversion that fits."""

from __future__ import annotations

import types

import numpy as np
import pytest

import tracekit
from tools.ports import lstm_model
from tracekit.replay import conversions

from ..support import golden

I, U = 3, 6


def _var(shape):
    return types.SimpleNamespace(shape=shape, name="v")


def _keras_lstm():
    cell = types.SimpleNamespace(kernel=_var((I, 4 * U)), recurrent_kernel=_var((U, 4 * U)), bias=_var((4 * U,)))
    return types.SimpleNamespace(name="lstm", cell=cell)


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def test_the_lstm_conversion_computes_what_the_tf1_cell_computes():
    conv = conversions.lstm("rnn/lstm_cell", _keras_lstm(), forget_bias=1.0)
    conversions.bind([conv], {"rnn/lstm_cell/kernel:0": (I + U, 4 * U), "rnn/lstm_cell/bias:0": (4 * U,)},
                     lambda v: v.shape)
    rng = np.random.RandomState(0)
    g_kernel, g_bias = rng.randn(I + U, 4 * U).astype("f4"), rng.randn(4 * U).astype("f4")
    kernel, recurrent, bias = conv.values_to_port([g_kernel, g_bias])
    x, h, c = rng.randn(2, I), rng.randn(2, U), rng.randn(2, U)
    # TF1 LSTMCell: gates i, j, f, o from [x, h]; forget_bias added to f at run time
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ g_kernel + g_bias, 4, 1)
    c_tf1 = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
    # Keras LSTM: gates i, f, c, o from x and h separately
    i, f, cc, o2 = np.split(x @ kernel + h @ recurrent + bias, 4, 1)
    c_keras = _sigmoid(f) * c + _sigmoid(i) * np.tanh(cc)
    np.testing.assert_allclose(c_keras, c_tf1, atol=1e-5)
    np.testing.assert_allclose(_sigmoid(o2) * np.tanh(c_keras), _sigmoid(o) * np.tanh(c_tf1), atol=1e-5)
    back = conv.values_to_golden([kernel, recurrent, bias])
    assert np.array_equal(back[0], g_kernel)
    np.testing.assert_allclose(back[1], g_bias, atol=2e-7)  # + forget_bias - forget_bias: one rounding
    # gradients and slots are rearranged only: no forget bias in them
    grads = conv.deltas_to_port([g_kernel, g_bias])
    assert np.array_equal(grads[2][U:2 * U], g_bias[2 * U:3 * U])
    assert all(np.array_equal(a, b) for a, b in zip(conv.deltas_to_golden(grads), [g_kernel, g_bias]))


def test_transpose_and_reshape_round_trip():
    kernel = np.arange(6, dtype="f4").reshape(3, 2)
    conv = conversions.transpose("d/kernel:0", _var((1, 1, 3, 2)), axes=(0, 1), shape=(1, 1, 3, 2))
    conversions.bind([conv], {"d/kernel:0": (3, 2)}, lambda v: v.shape)
    port = conv.values_to_port([kernel])[0]
    assert port.shape == (1, 1, 3, 2) and np.array_equal(conv.values_to_golden([port])[0], kernel)
    flipped = conversions.transpose("d/kernel:0", _var((2, 3)))
    conversions.bind([flipped], {"d/kernel:0": (3, 2)}, lambda v: v.shape)
    assert np.array_equal(flipped.values_to_port([kernel])[0], kernel.T)


def test_a_conversion_that_does_not_fit_is_refused_before_anything_runs():
    with pytest.raises(tracekit.ReplayError, match=r"convert to shapes \[\(2, 3\)\], the port's variables have "
                                                   r"\[\(3, 2\)\]"):
        conversions.bind([conversions.transpose("d/kernel:0", _var((3, 2)))], {"d/kernel:0": (3, 2)},
                         lambda v: v.shape)
    with pytest.raises(tracekit.ReplayError, match="the golden has no rnn/lstm_cell/kernel:0"):
        conversions.bind([conversions.lstm("rnn/lstm_cell", _keras_lstm())], {"dense/kernel:0": (6, 2)},
                         lambda v: v.shape)


def test_a_keras_lstm_replays_an_lstmcell_golden(tf2):
    model, step = lstm_model.make()
    actual = tf2.replay(golden("lstm_model"), step, model=model, convert=lstm_model.conversions(model))
    result = tracekit.compare(golden("lstm_model"), actual)  # the default tolerance, all 20 steps
    assert result.ok and result.steps == 20, result.report()
    for key in ("var/rnn/lstm_cell/kernel:0", "grad/rnn/lstm_cell/kernel:0", "slot/rnn/lstm_cell/kernel/Adam_1:0",
                "var/rnn/lstm_cell/bias:0", "grad/rnn/lstm_cell/bias:0", "slot/rnn/lstm_cell/bias/Adam:0"):
        assert result.tensor(*key.split("/", 1)).steps >= 20, key  # compared in the golden's names and shapes
    assert actual.meta["replay"]["converted"]["rnn/lstm_cell/kernel:0"].startswith("TF1 LSTMCell rnn/lstm_cell")


@pytest.mark.parametrize("options, conversion, expected", [
    ({"epsilon": 1e-7}, {}, (0, "var/rnn/lstm_cell/kernel:0")),  # Keras Adam's default epsilon
    ({"go_backwards": True}, {}, (0, "tap/last_output")),  # the sequence read backwards
    ({}, {"forget_bias": 0.0}, (0, "tap/last_output")),  # the conversion without TF1's forget bias
    ({"learning_rate": 1e-3}, {}, (0, "lr/learning_rate")),
])
def test_wrong_lstm_ports_are_caught_where_they_depart(tf2, options, conversion, expected):
    model, step = lstm_model.make(**options)
    actual = tf2.replay(golden("lstm_model"), step, model=model, steps=3,
                        convert=lstm_model.conversions(model, **conversion))
    result = tracekit.compare(golden("lstm_model"), actual)
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == expected, result.report()


def test_without_the_conversion_the_refusal_names_it(tf2):
    model, step = lstm_model.make()
    with pytest.raises(tracekit.ReplayError) as err:
        tf2.replay(golden("lstm_model"), step, model=model)
    message = str(err.value)
    assert "only in the golden: rnn/lstm_cell/kernel:0 (9, 24)" in message
    assert 'pass convert=[tracekit.tf2.lstm("rnn/lstm_cell", <that Keras LSTM layer>)]' in message
