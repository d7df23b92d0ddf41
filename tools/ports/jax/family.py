"""JAX ports of the family's goldens (tools/family_spec.py, recorded by tools/goldens/family.py),
written as a migrating team writes them: a flax module of Dense layers left at flax's own names
(`Dense_0`, ...; or Conv and max_pool), paired with TF1's `dense_<i>` scopes by a var_map of
rules; TF's Adam (tf_forms.tf_adam, epsilon 1e-8), optax.sgd with momentum for TF1's Momentum (the
same accumulator), optax.rmsprop started and placed as TF1's (initial_scale=1, epsilon inside the
square root); TF1's exponential decay of the rate as an optax schedule of the optimizer's count,
under optax.inject_hyperparams; the L2 weight decay in the loss; a jitted step on a TrainState.

make_port(run, slip=False, rms_start=1.0) -> (train state, step, {"var_map": ...}): slip=True makes
the run's wrong port (its slip from run.slip_at on); rms_start=0.0 starts RMSProp's mean squares
at optax's default, where TF1 starts them at 1.
"""

import jax
import jax.numpy as jnp
import optax
from flax import linen as nn

from tools import family_spec as spec

from . import TrainState
from .tf_forms import tf_adam

ACTIVATIONS = {"relu": nn.relu, "tanh": jnp.tanh, "gelu": lambda x: nn.gelu(x, approximate=False),
               "conv": nn.relu}


class Net(nn.Module):
    model: str
    depth: int
    width: int
    channels: int
    dropout: float

    @nn.compact
    def __call__(self, x, train=True):
        act = ACTIVATIONS[self.model]
        if self.model == "conv":
            for _ in range(self.depth - 1):
                x = nn.max_pool(act(nn.Conv(self.channels, (3, 3), padding="SAME")(x)), (2, 2), strides=(2, 2))
            x = x.reshape(x.shape[0], -1)  # NHWC, flattened in TF's order
        else:
            for _ in range(self.depth - 1):
                x = act(nn.Dense(self.width)(x))
        if self.dropout:
            x = nn.Dropout(self.dropout, deterministic=not train)(x)
        return nn.Dense(spec.CLASSES, name="logits")(x)


def _tx(run, slip, rms_start):
    rate = spec.RATES[run.optimizer]
    if run.optimizer == "momentum":
        return optax.inject_hyperparams(optax.sgd)(learning_rate=rate, momentum=spec.MOMENTUM)

    def schedule(count):  # TF1's exponential_decay; read one step late from slip_at by the "late" slip
        late = (count >= run.slip_at).astype(jnp.float32) if slip == "late" else 0.0
        return rate * 0.5 ** ((count - late) / spec.RATE_HALVING)
    if run.optimizer == "adam":
        return optax.inject_hyperparams(tf_adam)(learning_rate=schedule, eps=1e-8)
    return optax.inject_hyperparams(optax.rmsprop)(learning_rate=schedule, decay=spec.RHO, eps=spec.RMS_EPSILON,
                                                   initial_scale=rms_start, eps_in_sqrt=True)


def make_port(run, slip=False, rms_start=1.0):
    slip = run.slip if slip else None
    model = Net(run.model, run.depth, run.width, run.channels, run.dropout)
    shape = (1, spec.IMAGE, spec.IMAGE, 3) if run.model == "conv" else (1, run.features)
    key = jax.random.key(run.seed)
    params = model.init({"params": key, "dropout": key}, jnp.zeros(shape, jnp.float32), train=False)["params"]
    state = TrainState.create(apply_fn=model.apply, params=params, tx=_tx(run, slip, rms_start), key=jax.random.key(1))
    kind = "Conv" if run.model == "conv" else "Dense"
    scaled = "%s_%d" % (kind, run.slip_layer)

    @jax.jit
    def step(state, batch):
        at = state.step

        def loss_fn(params):
            logits = state.apply_fn({"params": params}, batch["x:0"], rngs={"dropout": jax.random.fold_in(state.key, at)})
            loss = optax.softmax_cross_entropy(logits, batch["y:0"]).mean()
            kernels = [leaf for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]
                       if path[-1].key == "kernel"]
            decay = spec.DECAY * sum(jnp.sum(k * k) / 2 for k in kernels)
            if slip == "decay":
                decay = jnp.where(at >= run.slip_at, 0.0, decay)
            return loss + decay

        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        state = state.apply_gradients(grads=grads)
        if slip == "scale":
            params = dict(state.params)
            kernel = params[scaled]["kernel"]
            params[scaled] = dict(params[scaled], kernel=jnp.where(at == run.slip_at, kernel * (1.0 + spec.SCALE),
                                                                    kernel))
            state = state.replace(params=params)
        return state, {"loss": loss}

    hidden = "conv" if run.model == "conv" else "dense"
    var_map = [(r"^%s_(\d+)/kernel:0$" % hidden, r"params/%s_\1/kernel" % kind),
               (r"^%s_(\d+)/bias:0$" % hidden, r"params/%s_\1/bias" % kind)]
    return state, step, {"var_map": var_map}
