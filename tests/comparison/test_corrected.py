"""The two corrections one framework makes and another does not (comparison/corrected.py),
fitted on generated updates: named where they are the difference, over sizes, rates, step
counts and both directions, and not named for the differences they resemble."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tracekit.comparison import corrected

TOL = tracekit.Tolerance().resolve("var", "w:0", 0, "float32")


def _running(n, rate, features=64, seed=0, unbiased=False):
    """A moving variance's start, and after one batch of n values per feature, Keras-style
    (biased) or with Bessel's correction."""
    rng = np.random.default_rng(seed)
    start = rng.uniform(0.5, 2.0, features).astype(np.float32)
    batch = rng.normal(0, rng.uniform(0.3, 3.0, features), (n, features)).astype(np.float32)
    var = batch.var(axis=0).astype(np.float64) * (n / (n - 1.0) if unbiased else 1.0)
    return start, (start - (start - var) * rate).astype(np.float32)


@pytest.mark.parametrize("n", [2, 8, 32, 512, 12544])
@pytest.mark.parametrize("rate", [0.1, 0.01, 0.003])
@pytest.mark.parametrize("port_corrects", [True, False])
def test_a_running_variance_kept_with_bessels_correction_on_one_side_is_named(n, rate, port_corrects):
    start, biased = _running(n, rate)
    _, unbiased = _running(n, rate, unbiased=True)
    golden, port = (biased, unbiased) if port_corrects else (unbiased, biased)
    found = corrected.bessel("var/bn/moving_variance:0", start, golden, port, TOL)
    assert found is not None and abs(found.detail["rate"] / rate - 1) < 0.05
    # n shows in the last bits of n / (n - 1): exact for a batch's rows, near for a conv's n x h x w
    assert found.detail["n"] == n if n <= corrected.BESSEL_N_EXACT else abs(found.detail["n"] / n - 1) < 0.05
    assert (found.port > found.golden) == port_corrects


@pytest.mark.parametrize("golden_rate, port_rate", [(0.01, 0.1), (0.01, 0.001), (0.1, 0.3), (0.01, 0.0114)])
def test_another_momentum_is_not_bessels_correction(golden_rate, port_rate):
    start, golden = _running(8, golden_rate)
    _, port = _running(8, port_rate)
    assert corrected.bessel("var/bn/moving_variance:0", start, golden, port, TOL) is None


def test_the_same_update_is_not_named():
    start, golden = _running(8, 0.01)
    assert corrected.bessel("var/bn/moving_variance:0", start, golden, golden.copy(), TOL) is None


def _adam(t, eps, after_correction, lr=1e-2, betas=(0.9, 0.999), size=4096, seed=1):
    """A variable's start, its Adam moments after step t, and the update in TF's form or with
    epsilon after the bias correction (PyTorch's)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.5, size)
    m = rng.normal(0, 1e-2, size) * (1 - betas[0] ** t)
    v = np.abs(rng.normal(0, 1e-4, size)) * rng.choice([1e-8, 1e-4, 1.0], size) * (1 - betas[1] ** t)
    b1, b2 = 1 - betas[0] ** t, 1 - betas[1] ** t
    if after_correction:
        move = -lr / b1 * m / (np.sqrt(v) / np.sqrt(b2) + eps)
    else:
        move = -lr * np.sqrt(b2) / b1 * m / (np.sqrt(v) + eps)
    return w, m, v, (w + move).astype(np.float32)


@pytest.mark.parametrize("t", [1, 3, 100])
@pytest.mark.parametrize("eps", [1e-7, 1e-8])
def test_epsilon_after_the_bias_correction_is_named_at_its_step_count(t, eps):
    w, m, v, golden = _adam(t, eps, after_correction=False)
    _, _, _, port = _adam(t, eps, after_correction=True)
    b1, b2 = 1 - 0.9 ** t, 1 - 0.999 ** t
    golden_fit = {"alpha": 1e-2 * np.sqrt(b2) / b1, "eps": eps, "decay": 0.0}

    def predict(p):
        return w - p["alpha"] * m / (np.sqrt(v) + p["eps"]) - p["decay"] * w
    assert np.max(np.abs(port - golden)) > 1e-4  # the two forms part clearly where v is near zero
    hat = corrected.epsilon_hat(golden_fit, predict, port, TOL, 0.999, (t,), (1e-3, 1e-7, 1e-8))
    assert hat is not None and (hat.eps, hat.t) == (eps, t)
    assert abs(hat.acting / (eps * np.sqrt(b2)) - 1) < 1e-9


def test_another_epsilon_in_tfs_form_is_not_the_corrections():
    w, m, v, golden = _adam(1, 1e-7, after_correction=False)
    _, _, _, port = _adam(1, 1e-4, after_correction=False)
    golden_fit = {"alpha": 1e-2 * np.sqrt(1 - 0.999) / 0.1, "eps": 1e-7, "decay": 0.0}

    def predict(p):
        return w - p["alpha"] * m / (np.sqrt(v) + p["eps"]) - p["decay"] * w
    assert corrected.epsilon_hat(golden_fit, predict, port, TOL, 0.999, (1,), (1e-7, 1e-8)) is None
