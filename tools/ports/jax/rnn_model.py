"""JAX port of the LSTM example (goldens/lstm_model.h5): a TF1 LSTMCell(6, forget_bias=1) under
dynamic_rnn and a dense head, trained with TF1's Adam (epsilon 1e-8), ported to flax's
`nn.RNN(nn.LSTMCell(6))` and a Dense. The cell's weights convert with tracekit.jax.lstm (TF1's
one kernel and gate order i, j, f, o to flax's Dense per gate and side; the forget bias TF1 adds
at run time held in the `hf` bias). The step taps the last output and the logits inside jit.

`make()` returns (train state, step, {"convert": [...]}); its keyword arguments build deliberately
wrong ports: forget_bias=0.0 (TF1's forget bias left out), reverse=True (the sequence read
backwards, as a bidirectional port's backward half would), optimizer="optax" (optax.adam: epsilon
after the bias correction), epsilon=1e-7 (Keras' Adam epsilon, where TF1's AdamOptimizer's is 1e-8).
"""

import jax
import optax
from flax import linen as nn

import tracekit
import tracekit.jax

from . import TrainState
from .tf_forms import tf_adam

INPUTS, UNITS, CLASSES = 3, 6, 2


class Net(nn.Module):
    reverse: bool = False

    @nn.compact
    def __call__(self, x):
        out = nn.RNN(nn.LSTMCell(UNITS), reverse=self.reverse, keep_order=True)(x)
        last = tracekit.tap("last_output", out[:, -1])
        return tracekit.tap("logits", nn.Dense(CLASSES, name="dense")(last))


def make(forget_bias=1.0, reverse=False, lr=1e-2, optimizer="tf", epsilon=1e-8):
    model = Net(reverse)
    params = model.init(jax.random.key(0), jax.numpy.zeros((1, 5, INPUTS), jax.numpy.float32))["params"]
    tx = optax.inject_hyperparams(tf_adam if optimizer == "tf" else optax.adam)(learning_rate=lr, eps=epsilon)
    state = TrainState.create(apply_fn=model.apply, params=params, tx=tx)

    @jax.jit
    def step(state, inputs):
        def loss_fn(params):
            logits = state.apply_fn({"params": params}, inputs["x:0"])
            return optax.softmax_cross_entropy(logits, inputs["y:0"]).mean()
        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        return state.apply_gradients(grads=grads), loss

    convert = [tracekit.jax.lstm("rnn/lstm_cell", "params/LSTMCell_0", forget_bias=forget_bias)]
    return state, step, {"convert": convert}
