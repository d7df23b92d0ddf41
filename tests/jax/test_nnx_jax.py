"""A flax NNX port (tools/ports/jax/keras_fit_nnx.py: modules and an nnx.Optimizer updated in place
by an nnx.jit step) replayed through tracekit.jax.nnx_port on the TF1 Keras fit golden: it matches
as the linen port does, teacher-forced and not, judged locally with the float64 arbiter too; the
optax and flax defaults it slips on are named; what nnx_port cannot replay is refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tools.ports.jax import keras_fit_nnx
from tracekit.comparison.corrected import EPSILON_HAT
from tracekit.comparison.fingerprints import AVERAGE_RATE

from ..support import golden
from .test_keras_fit_jax import loaded_as_golden


@pytest.mark.parametrize("forcing", ["none", "state"])
def test_an_nnx_port_matches(tj, forcing):
    state, step = keras_fit_nnx.make()
    result = tj.check(golden("keras_fit"), step, state=state, forcing=forcing, tolerance="training")
    assert result.ok and result.steps == 16, result.report()
    assert {"input", "random", "loss", "lr", "grad", "var", "slot"} <= {t.kind for t in result.tensors}
    assert "replay of tools.ports.jax.keras_fit_nnx.train_step" in result.report()  # the port's own step named


def test_the_nnx_state_loads_reads_back_and_takes_the_goldens_draws(tj, tmp_path):
    actual = loaded_as_golden(tj, *keras_fit_nnx.make(), tmp_path)
    mapping = actual.meta["replay"]["mapping"]
    assert mapping["hidden/kernel:0"] == "params/hidden/kernel"
    assert mapping["bn/moving_variance:0"] == "batch_stats/bn/var"


def test_an_nnx_factory_is_judged_locally_with_the_float64_arbiter(tj):
    result = tj.check(golden("keras_fit"), make_port=keras_fit_nnx.make, judge="local")
    assert result.ok and result.judged == "local" and result.steps == 16, result.report()


@pytest.mark.parametrize("port, expected, cause", [
    ({"optimizer": "optax"}, (0, "var/hidden/kernel:0"), EPSILON_HAT),  # optax.adam: epsilon after the correction
    ({"bn_momentum": 0.9}, (0, "var/bn/moving_mean:0"), AVERAGE_RATE),  # not Keras' 0.99
])
def test_nnx_slips_are_caught_where_they_depart_and_named(tj, port, expected, cause):
    state, step = keras_fit_nnx.make(**port)
    result = tj.check(golden("keras_fit"), step, state=state, tolerance="training")
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == expected, result.report()
    assert cause in {f.code for f in result.fingerprints}, result.report()


def test_what_nnx_port_cannot_replay_is_refused_by_name(tj):
    import optax
    from flax import nnx

    model = keras_fit_nnx.Net(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
    with pytest.raises(tracekit.UsageError, match="nnx.Module"):
        tj.nnx_port(object(), optimizer, keras_fit_nnx.train_step)
    with pytest.raises(tracekit.UsageError, match="nnx.Optimizer"):
        tj.nnx_port(model, optax.sgd(0.1), keras_fit_nnx.train_step)

    class Counted(nnx.Variable):
        pass
    model.seen = Counted(np.zeros(()))  # a kind of variable the replay would neither load nor read
    with pytest.raises(tracekit.UsageError, match="Counted"):
        tj.nnx_port(model, optimizer, keras_fit_nnx.train_step)
