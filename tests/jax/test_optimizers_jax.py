"""tf.contrib.opt.AdamWOptimizer (plain_loop.py --optimizer adamw, recorded for real in TF 1.15)
replayed into a flax port: TF's Adam with the decoupled decay TF1 applies (weight_decay x var a
step, not times the rate) matches; optax.adamw, whose decay is multiplied by the rate, departs at
step 0 with that named."""

from __future__ import annotations

import pytest

from ..support.recording import record_optimizers


@pytest.fixture(scope="module")
def golden(legacy_python, tmp_path_factory):
    return record_optimizers(legacy_python, tmp_path_factory.mktemp("optimizers"), ("adamw",))["adamw"]


def _check(tj, golden, tx):
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax
    from flax.training import train_state

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(1, name="out")(nn.relu(nn.Dense(5, name="hidden")(x)))

    model = Net()
    params = model.init(jax.random.key(0), jnp.zeros((4, 3), jnp.float32))["params"]
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.inject_hyperparams(tx)(
        learning_rate=0.05))

    @jax.jit
    def step(state, inputs):
        def loss_fn(params):
            return jnp.mean((state.apply_fn({"params": params}, inputs["x:0"]) - 1.0) ** 2)
        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        return state.apply_gradients(grads=grads), loss
    return tj.check(golden, step, state=state, tolerance="training")


def test_tfs_adam_with_contribs_decoupled_decay_matches(tj, golden):
    import optax

    from tools.ports.jax.tf_forms import tf_adam

    def contrib_adamw(learning_rate):  # the decay after the rate's scaling: weight_decay x var, not times lr
        return optax.chain(tf_adam(learning_rate, eps=1e-8), optax.add_decayed_weights(-0.01))
    result = _check(tj, golden, contrib_adamw)
    assert result.ok and not result.missing, result.report()
    assert {t.kind for t in result.tensors} >= {"var", "grad", "slot", "lr"}


def test_optaxs_adamw_for_tf_contribs_is_named_its_decay_times_the_rate(tj, golden):
    import optax

    def adamw(learning_rate):
        return optax.adamw(learning_rate, eps=1e-8, weight_decay=0.01)
    result = _check(tj, golden, adamw)
    divergence = result.first_divergence
    assert not result.ok and divergence.step == 0 and divergence.kind == "var", result.report()
    assert "weight-decay-rate" in [f.code for f in result.fingerprints], result.report()
    assert "the port's decay is TF1's times the learning rate" in result.report()
