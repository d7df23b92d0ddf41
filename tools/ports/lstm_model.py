"""TF2 port of the LSTM example (goldens/lstm_model.h5): a Keras LSTM layer where TF1 had
an LSTMCell under dynamic_rnn, a Dense head, Keras Adam with TF1's epsilon. Replay it with
the weight conversion: convert=[tracekit.tf2.lstm("rnn/lstm_cell", model.lstm)].

`make()` returns (model, step); its keyword arguments build deliberately wrong ports.
"""

import tensorflow as tf

import tracekit

UNITS, CLASSES = 6, 2


class LSTMModel(tf.keras.Model):
    def __init__(self):
        super().__init__(name="lstm_model")
        self.lstm = tf.keras.layers.LSTM(UNITS, name="lstm")
        self.dense = tf.keras.layers.Dense(CLASSES, name="dense")

    def call(self, x):
        last = tracekit.tap("last_output", self.lstm(x))
        return tracekit.tap("logits", self.dense(last))


def make(learning_rate=1e-2, epsilon=1e-8, go_backwards=False):
    model = LSTMModel()
    if go_backwards:
        model.lstm.go_backwards = True
    model(tf.zeros((4, 5, 3)))
    optimizer = tf.keras.optimizers.Adam(learning_rate, epsilon=epsilon)  # TF1 AdamOptimizer's epsilon
    loss_fn = tf.keras.losses.CategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = loss_fn(inputs["y:0"], model(inputs["x:0"]))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}

    return model, step


def conversions(model, forget_bias=1.0):
    return [tracekit.tf2.lstm("rnn/lstm_cell", model.lstm, forget_bias=forget_bias)]
