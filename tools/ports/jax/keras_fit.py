"""flax port of the TF1 Keras fit example (goldens/keras_fit.h5): Dense, BatchNormalization,
ReLU, Dropout, Dense under Keras' Adam, with a softmax cross-entropy on one-hot labels.

Keras' defaults written out in flax's terms: BatchNorm's momentum 0.99 and epsilon 1e-3, its
variance computed as the mean of squared deviations (flax's default `use_fast_variance` takes
E[x^2] - E[x]^2); Adam in TF's form (tf_forms.tf_adam), epsilon 1e-7. `make()` returns (train
state, step); its keyword arguments build deliberately wrong ports: optimizer="optax"
(optax.adam, epsilon after the bias correction), bn_epsilon=1e-5 (flax's default), dropout=0.5,
weight_decay=0.01 (optax.add_decayed_weights chained before Adam: an L2 term inside the optimizer).
"""

import jax.numpy as jnp
import optax
from flax import linen as nn

from . import create, supervised_step
from .tf_forms import tf_adam

FEATURES, CLASSES = 5, 3


class Net(nn.Module):
    bn_momentum: float = 0.99
    bn_epsilon: float = 1e-3
    fast_variance: bool = False
    dropout: float = 0.25

    @nn.compact
    def __call__(self, x, train):
        x = nn.Dense(16, name="hidden")(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=self.bn_momentum, epsilon=self.bn_epsilon,
                         use_fast_variance=self.fast_variance, name="bn")(x)
        x = nn.Dropout(self.dropout, deterministic=not train)(nn.relu(x))
        return nn.Dense(CLASSES, name="logits")(x)


def make(optimizer="tf", bn_momentum=0.99, bn_epsilon=1e-3, fast_variance=False, dropout=0.25, lr=1e-2,
         weight_decay=0.0):
    adam = tf_adam if optimizer == "tf" else optax.adam
    tx = optax.inject_hyperparams(adam)(learning_rate=lr, eps=1e-7)
    if weight_decay:  # an L2 term added to the gradient before Adam's moments (torch's Adam(weight_decay=))
        tx = optax.chain(optax.add_decayed_weights(weight_decay), tx)
    model = Net(bn_momentum, bn_epsilon, fast_variance, dropout)
    state = create(model, tx, jnp.zeros((1, FEATURES), jnp.float32))
    return state, supervised_step(x="hidden_input:0", y="logits_target:0")


def make_with_optax_adam():
    """The port with optax.adam (a factory for `tracekit check GOLDEN MODULE:FUNCTION`)."""
    return make(optimizer="optax")
