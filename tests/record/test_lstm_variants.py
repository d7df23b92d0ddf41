"""TF 1.15's LSTM cells as a golden holds them, against tracekit.tf2.lstm: a plain LSTMCell and
a BasicLSTMCell convert; a cell with peepholes or a projection, which Keras LSTM cannot
express, is refused by name before anything is loaded. The conversion is numpy only, so it
runs here, next to the TF1 variables it must name right."""

from __future__ import annotations

import types

import numpy as np
import pytest

import tracekit
from tracekit.replay import conversions

pytestmark = pytest.mark.tf1

INPUTS, UNITS = 3, 5


def cell_variables(tf, graph, cell):
    """{name: shape} of a TF1 cell run by dynamic_rnn, as a recording names them."""
    x = tf.compat.v1.placeholder(tf.float32, [2, 4, INPUTS])
    tf.compat.v1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    return {v.name: tuple(v.shape.as_list()) for v in tf.compat.v1.global_variables()}


def keras_lstm():
    var = lambda shape: types.SimpleNamespace(shape=shape, name="v")  # noqa: E731
    cell = types.SimpleNamespace(kernel=var((INPUTS, 4 * UNITS)), recurrent_kernel=var((UNITS, 4 * UNITS)),
                                 bias=var((4 * UNITS,)))
    return types.SimpleNamespace(name="lstm", cell=cell)


@pytest.mark.parametrize("make", ["LSTMCell", "BasicLSTMCell"])
def test_plain_tf1_lstm_cells_convert(tf, graph, make):
    shapes = cell_variables(tf, graph, getattr(tf.compat.v1.nn.rnn_cell, make)(UNITS))
    conv = conversions.lstm("rnn/%s" % ("lstm_cell" if make == "LSTMCell" else "basic_lstm_cell"), keras_lstm())
    conversions.bind([conv], shapes, lambda v: v.shape)
    kernel = np.arange(np.prod(shapes[conv.golden[0]]), dtype=np.float32).reshape(shapes[conv.golden[0]])
    back = conv.values_to_golden(conv.values_to_port([kernel, np.zeros(4 * UNITS, np.float32)]))
    assert np.array_equal(back[0], kernel)


@pytest.mark.parametrize("options, why", [
    ({"use_peepholes": True}, "peephole connections"),
    ({"num_proj": 2}, "projects its output"),
])
def test_lstm_cells_keras_cannot_express_are_refused(tf, graph, options, why):
    shapes = cell_variables(tf, graph, tf.compat.v1.nn.rnn_cell.LSTMCell(UNITS, **options))
    with pytest.raises(tracekit.ReplayError, match="conversion TF1 LSTMCell rnn/lstm_cell -> Keras LSTM lstm: .*%s"
                                                   % why):
        conversions.bind([conversions.lstm("rnn/lstm_cell", keras_lstm())], shapes, lambda v: v.shape)
