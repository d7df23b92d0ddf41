"""JAX (flax with optax) ports of the shipped goldens' programs, written as a team porting them
would: a flax TrainState and a jitted functional step."""

from typing import Any

import jax
import optax
from flax.training import train_state


class TrainState(train_state.TrainState):
    """flax's TrainState with the model's other collections (batch norm's statistics) and the
    key its dropout draws from."""

    batch_stats: Any = None
    key: Any = None


def supervised_step(x="x:0", y="y:0"):
    """The usual jitted training step on the golden's inputs `x` and one-hot labels `y`: the
    softmax cross-entropy of the model's output, its gradients, one optimizer update."""
    @jax.jit
    def step(state, inputs):
        dropout_key = jax.random.fold_in(state.key, state.step)

        def loss_fn(params):
            variables = {"params": params}
            if state.batch_stats is not None:
                variables["batch_stats"] = state.batch_stats
            logits, updates = state.apply_fn(variables, inputs[x], train=True, rngs={"dropout": dropout_key},
                                             mutable=["batch_stats"])
            return optax.softmax_cross_entropy(logits, inputs[y]).mean(), updates

        (loss, updates), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        state = state.apply_gradients(grads=grads)
        if state.batch_stats is not None:
            state = state.replace(batch_stats=updates["batch_stats"])
        return state, loss
    return step


def create(model, tx, example, seed=0):
    """The train state of `model` (a flax module) for inputs like `example`, under `tx`."""
    key = jax.random.key(seed)
    variables = model.init({"params": key, "dropout": key}, example, train=False)
    return TrainState.create(apply_fn=model.apply, params=variables["params"], tx=tx,
                             batch_stats=variables.get("batch_stats"), key=jax.random.key(seed + 1))
