"""A layer's output that departs first, named by the activation or normalization change that
predicts the port's values from TF1's (comparison/activations.py). Generated: every ordered pair
of the activations teams swap, on pre-activations of several scales, each named as itself; a
LayerNorm's epsilon changed either way, with random gains and offsets and rows of spread
variance; and the changes that are neither (a scaled or shifted pre-activation, noise, one factor
on every row) named as nothing."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tracekit.comparison.activations import ACTIVATION, ACTIVATIONS, NORM_EPSILON, fingerprints

from ..support import build_golden

KEY = "tap/ffn/activation:0"


def _tol():
    return tracekit.Tolerance().resolve("tap", KEY[len("tap/"):], 0, "float32")


def _pre_activations(seed, scale, shape=(16, 32)):
    return np.random.RandomState(seed).randn(*shape) * scale


@pytest.mark.parametrize("ours", ACTIVATIONS, ids=lambda a: a.name)
@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_each_activation_swapped_for_another_is_named(ours, scale):
    z = _pre_activations(7, scale)
    golden = ours.f(z).astype(np.float32)
    for theirs in ACTIVATIONS:
        if theirs is ours:
            continue
        port = theirs.f(z).astype(np.float32)
        found = fingerprints(KEY, 3, golden, port, _tol())
        if np.allclose(golden, port, rtol=1e-4, atol=1e-5):  # (nothing to name: a tolerance passes it)
            continue
        assert [(f.code, f.detail["golden"], f.detail["port"]) for f in found] == \
            [(ACTIVATION, ours.name, theirs.name)], (ours.name, theirs.name)
        assert found[0].step == 3 and found[0].keys == (KEY,)


@pytest.mark.parametrize("change", ["scaled", "shifted", "noise", "one factor"])
@pytest.mark.parametrize("ours", ACTIVATIONS, ids=lambda a: a.name)
def test_what_no_activation_or_epsilon_explains_is_not_named(ours, change):
    z = _pre_activations(11, 1.5)
    rs = np.random.RandomState(5)
    golden = ours.f(z).astype(np.float32)
    port = {"scaled": lambda: ours.f(1.02 * z), "shifted": lambda: ours.f(z + 0.02),
            "noise": lambda: golden * (1 + 1e-3 * rs.randn(*z.shape)),
            "one factor": lambda: golden * 1.003}[change]().astype(np.float32)
    assert fingerprints(KEY, 0, golden, port, _tol()) == []


def _layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(variance + epsilon) * gamma + beta).astype(np.float32)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("tf1, port", [(1e-12, 1e-3), (1e-5, 1e-3), (1e-3, 1e-12), (1e-6, 1e-4)])
def test_a_layer_norm_epsilon_changed_either_way_is_named(seed, tf1, port):
    rs = np.random.RandomState(seed)
    x = rs.randn(24, 16) * 10.0 ** rs.uniform(-2.5, 0.0, (24, 1))  # rows of spread variance
    gamma, beta = 1 + 0.1 * rs.randn(16), 0.1 * rs.randn(16)
    found = fingerprints(KEY, 1, _layer_norm(x, gamma, beta, tf1), _layer_norm(x, gamma, beta, port), _tol())
    assert [(f.code, f.detail["larger"]) for f in found] == [(NORM_EPSILON, "port" if port > tf1 else "golden")]


def test_a_replay_whose_layer_output_departs_first_names_its_activation(tmp_path):
    # TF1 code's tanh-approximated GELU, a port's exact one (Keras' default): the tap departs at
    # step 0 and the report says which GELU TF1 used and how to ask for it; the correct port matches.
    rs = np.random.RandomState(0)
    pre = [rs.randn(8, 16) for _ in range(3)]
    tanh, erf = (next(a for a in ACTIVATIONS if a.name == n) for n in ("gelu_tanh", "gelu_erf"))

    def trace(name, f, meta=None):
        return build_golden(str(tmp_path / name), ({KEY: f.f(z).astype(np.float32),
                                                    "loss/loss": np.float32(k)} for k, z in enumerate(pre)), meta=meta)
    golden = trace("golden.h5", tanh)
    assert tracekit.compare(golden, trace("same.h5", tanh, {"replay": {"forcing": "state"}})).ok
    result = tracekit.compare(golden, trace("port.h5", erf, {"replay": {"forcing": "state"}}))
    assert not result.ok and result.first_divergence.key == KEY
    named, = result.fingerprints
    assert (named.code, named.detail["golden"], named.detail["port"]) == (ACTIVATION, "gelu_tanh", "gelu_erf")
    assert "approximate=True" in result.report()
