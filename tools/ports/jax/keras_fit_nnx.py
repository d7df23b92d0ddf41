"""flax NNX port of the TF1 Keras fit example (goldens/keras_fit.h5): the linen port's model
(keras_fit.py) written as NNX modules, trained by an `nnx.Optimizer` in an `nnx.jit`ted step that
updates both in place, as flax's NNX examples write one. tracekit.jax.nnx_port hands it to the
replay. Its keyword arguments build deliberately wrong ports, as the linen port's do:
optimizer="optax" (optax.adam, epsilon after the bias correction), bn_momentum=0.9.
"""

import optax
from flax import nnx

import tracekit.jax

from .keras_fit import CLASSES, FEATURES
from .tf_forms import tf_adam


class Net(nnx.Module):
    def __init__(self, rngs, bn_momentum=0.99, dropout=0.25):
        self.hidden = nnx.Linear(FEATURES, 16, rngs=rngs)
        self.bn = nnx.BatchNorm(16, momentum=bn_momentum, epsilon=1e-3, use_fast_variance=False, rngs=rngs)
        self.dropout = nnx.Dropout(dropout, rngs=rngs)
        self.logits = nnx.Linear(16, CLASSES, rngs=rngs)

    def __call__(self, x):
        return self.logits(self.dropout(nnx.relu(self.bn(self.hidden(x)))))


@nnx.jit
def train_step(model, optimizer, inputs):
    def loss_fn(model):
        logits = model(inputs["hidden_input:0"])
        return optax.softmax_cross_entropy(logits, inputs["logits_target:0"]).mean()
    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def make(optimizer="tf", bn_momentum=0.99, lr=1e-2):
    model = Net(nnx.Rngs(0), bn_momentum)
    adam = tf_adam if optimizer == "tf" else optax.adam
    opt = nnx.Optimizer(model, optax.inject_hyperparams(adam)(learning_rate=lr, eps=1e-7), wrt=nnx.Param)
    state, step = tracekit.jax.nnx_port(model, opt, train_step)
    return state, step
