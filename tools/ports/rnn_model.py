"""TF2 ports of the recurrent examples (goldens/lstm_model.h5, goldens/gru_model.h5): a Keras
LSTM or GRU layer where TF1 had an LSTMCell or GRUCell under dynamic_rnn, and a Dense head.
The LSTM port trains with Keras Adam (TF1's epsilon), the GRU port with Keras SGD momentum.
Replay them with the weight conversion `conversions(model, cell)` returns, e.g.
convert=[tracekit.tf2.lstm("rnn/lstm_cell", model.rnn)].

`make(cell)` returns (model, step); its keyword arguments build deliberately wrong ports.
"""

import tensorflow as tf

import tracekit
from tools.ports import supervised_step

UNITS, CLASSES = 6, 2


class RNNModel(tf.keras.Model):
    def __init__(self, cell, go_backwards=False, reset_after=False):
        super().__init__(name="%s_model" % cell)
        if cell == "lstm":
            self.rnn = tf.keras.layers.LSTM(UNITS, name="lstm", go_backwards=go_backwards)
        else:
            self.rnn = tf.keras.layers.GRU(UNITS, name="gru", go_backwards=go_backwards, reset_after=reset_after)
        self.dense = tf.keras.layers.Dense(CLASSES, name="dense")

    def call(self, x):
        last = tracekit.tap("last_output", self.rnn(x))
        return tracekit.tap("logits", self.dense(last))


def make(cell, learning_rate=None, epsilon=1e-8, momentum=0.9, go_backwards=False, reset_after=False):
    model = RNNModel(cell, go_backwards, reset_after)
    model(tf.zeros((4, 5, 3)))
    if cell == "lstm":
        optimizer = tf.keras.optimizers.Adam(learning_rate or 1e-2, epsilon=epsilon)  # TF1 AdamOptimizer's epsilon
    else:
        optimizer = tf.keras.optimizers.SGD(learning_rate or 0.05, momentum=momentum)
    loss_fn = tf.keras.losses.CategoricalCrossentropy(from_logits=True)
    return model, supervised_step(model, optimizer, loss_fn)


def conversions(model, cell, forget_bias=1.0):
    if cell == "lstm":
        return [tracekit.tf2.lstm("rnn/lstm_cell", model.rnn, forget_bias=forget_bias)]
    return [tracekit.tf2.gru("rnn/gru_cell", model.rnn)]
