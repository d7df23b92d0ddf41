"""Amplified round-off followed through a comparison (tracekit/comparison/noise.py), on
synthetic traces shaped like a dense bias before batch norm under Adam: the bias's gradient
is noise, the bias moves by noise, the moving mean sees the bias. The real recording is in
tests/replay/test_keras_fit.py."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tracekit.comparison.noise import DRIVEN, FOLLOWS, GRADIENT, slot_owner

from ..support import build_golden

STEPS = 4
CH = 4


def trace(path, bias_error=0.0, mean_error=None, loss_error=0.0, kernel_grad_error=0.0, bias_grad=1e-9):
    """Step k: the bias off by bias_error * (k + 1) per channel (what Adam makes of noise), the
    moving mean off by mean_error(k) (default: a tenth of the bias's error one step earlier,
    as a moving average of the shifted batch mean)."""
    rng = np.random.RandomState(0)
    kernel = rng.randn(3, CH).astype(np.float32)
    signs = np.array([1, -1, 1, -1], dtype=np.float32)

    def steps():
        for k in range(STEPS):
            mean = (0.1 * bias_error * k * signs) if mean_error is None else mean_error(k)
            yield {
                "loss/loss": np.float32(1.0 - 0.1 * k + loss_error),
                "grad/dense/kernel:0": (kernel * 0.1 + kernel_grad_error).astype(np.float32),
                "grad/dense/bias:0": (np.full(CH, bias_grad) * signs).astype(np.float32),
                "grad/bn/gamma:0": np.full(CH, 0.05, np.float32),
                "var/dense/kernel:0": kernel,
                "var/dense/bias:0": (np.full(CH, 1e-3) + bias_error * (k + 1) * signs).astype(np.float32),
                "var/bn/gamma:0": np.ones(CH, np.float32),
                "var/bn/moving_mean:0": (np.full(CH, 0.2) + mean).astype(np.float32),
                "slot/dense/bias/Adam:0": (np.full(CH, 1e-9) + bias_error * signs).astype(np.float32),
            }
    return build_golden(str(path), steps())


@pytest.fixture
def golden(tmp_path):
    return trace(tmp_path / "golden.h5")


def test_a_variable_driven_by_a_noise_floor_gradient_is_explained_and_can_be_accepted(golden, tmp_path):
    actual = trace(tmp_path / "actual.h5", bias_error=1e-3)
    result = tracekit.compare(golden, actual)
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == (0, "var/dense/bias:0")
    assert first.noise.link == DRIVEN and first.noise.source == "grad/dense/bias:0"
    kinds = {n.key: n.link for n in result.noise}
    assert kinds == {"var/dense/bias:0": DRIVEN, "slot/dense/bias/Adam:0": DRIVEN, "var/bn/moving_mean:0": FOLLOWS}
    assert "driven by round-off" in result.report() and "accept_noise" in result.report()

    accepted = tracekit.compare(golden, actual, tracekit.Tolerance(accept_noise=True))
    assert accepted.ok and accepted.tensor("var", "dense/bias:0").accepted_steps == STEPS
    assert accepted.report().startswith("MATCH (explained noise accepted in 3 tensor(s))")
    assert tracekit.compare(golden, actual, tracekit.Tolerance.training()).ok  # the preset accepts it
    assert not tracekit.compare(golden, actual, tracekit.Tolerance.training(accept_noise=False)).ok


def test_a_following_tensor_beyond_what_the_noise_moved_is_not_explained(golden, tmp_path):
    # A wrong batch-norm momentum: the moving mean departs by more than the bias ever did.
    actual = trace(tmp_path / "actual.h5", bias_error=1e-3, mean_error=lambda k: np.full(CH, 5e-3 * (k + 1)))
    result = tracekit.compare(golden, actual, tracekit.Tolerance(accept_noise=True))
    first = result.first_divergence
    assert (first.step, first.key, first.noise) == (0, "var/bn/moving_mean:0", None)


def test_nothing_follows_before_the_noise_moved_anything(golden, tmp_path):
    # At step 0 no driven variable has differed yet: the moving mean has no budget.
    actual = trace(tmp_path / "actual.h5", bias_error=1e-3, mean_error=lambda k: np.full(CH, 5e-5))
    first = tracekit.compare(golden, actual, tracekit.Tolerance(accept_noise=True)).first_divergence
    assert (first.step, first.key) == (0, "var/bn/moving_mean:0")


def test_nothing_follows_when_the_loss_or_a_real_gradient_differs(golden, tmp_path):
    actual = trace(tmp_path / "actual.h5", bias_error=1e-3, loss_error=1e-3)
    result = tracekit.compare(golden, actual, tracekit.Tolerance(accept_noise=True))
    assert result.first_divergence.key == "loss/loss"
    assert "var/bn/moving_mean:0" not in {n.key for n in result.noise}
    actual = trace(tmp_path / "grad.h5", bias_error=1e-3, kernel_grad_error=1e-3)
    result = tracekit.compare(golden, actual, tracekit.Tolerance(accept_noise=True))
    assert result.first_divergence.key == "grad/dense/kernel:0"
    assert "var/bn/moving_mean:0" not in {n.key for n in result.noise}


def test_a_variable_whose_gradient_is_real_is_not_noise(tmp_path):
    golden = trace(tmp_path / "golden.h5", bias_grad=1e-2)
    actual = trace(tmp_path / "actual.h5", bias_grad=1e-2, bias_error=1e-3)
    result = tracekit.compare(golden, actual, tracekit.Tolerance(accept_noise=True))
    assert (result.first_divergence.key, result.first_divergence.noise) == ("var/dense/bias:0", None)
    assert result.noise == []


def test_a_failing_noise_floor_gradient_is_explained(golden, tmp_path):
    actual = trace(tmp_path / "actual.h5", bias_grad=-1e-9)
    result = tracekit.compare(golden, actual, tracekit.Tolerance(atol=0, rtol=1e-6))
    assert result.first_divergence.noise.link == GRADIENT
    assert tracekit.compare(golden, actual, tracekit.Tolerance(atol=0, rtol=1e-6, accept_noise=True)).ok


def test_accept_noise_in_a_tolerance_file():
    assert tracekit.Tolerance.from_dict({"accept_noise": True}).accept_noise
    assert tracekit.Tolerance(accept_noise=True).rule(kind="loss", atol=1).accept_noise
    assert not tracekit.Tolerance().accept_noise


@pytest.mark.parametrize("slot, owner", [
    ("dense/bias/Adam:0", "dense/bias:0"),  # TF1
    ("training/Adam/dense/bias/m:0", "dense/bias:0"),  # TF1 Keras, Keras
    ("dense/kernel/Momentum:0", "dense/kernel:0"),
    ("other/Adam:0", None),
])
def test_slot_owner(slot, owner):
    assert slot_owner(slot, ["dense/kernel:0", "dense/bias:0", "bias:0"]) == owner


def _sparse(path, ids):
    """An embedding's sparse gradient (its rows' ids, int64) beside a dense one of larger scale."""
    def steps():
        for k in range(STEPS):
            yield {"loss/loss": np.float32(1.0 - 0.1 * k),
                   "grad/dense/kernel:0": np.full((3, CH), 0.5, np.float32),
                   "grad/emb:0/values": np.full((len(ids), CH), 0.25, np.float32),
                   "grad/emb:0/indices": (np.asarray(ids) + k).astype(np.int64),
                   "tap/crossed_ids": (np.asarray(ids) % 3).astype(np.int64),
                   "var/emb:0": np.ones((50, CH), np.float32)}
    return build_golden(str(path), steps())


def test_integers_that_differ_are_never_noise(tmp_path):
    # Ids have no round-off: a golden scale of 0 and no max error in float terms must not put
    # them at a noise floor, under any tolerance (crossed-column ids, sparse gradient rows).
    golden = _sparse(tmp_path / "golden.h5", [1, 4, 7, 9, 12, 20, 33])
    actual = _sparse(tmp_path / "actual.h5", [1, 5, 8, 10, 13, 21, 34])
    for tolerance in (None, tracekit.Tolerance.training(), tracekit.Tolerance(accept_noise=True, atol=1e9)):
        result = tracekit.compare(golden, actual, tolerance)
        first = result.first_divergence
        assert not result.ok and result.noise == [] and first.noise is None, result.report()
        assert (first.step, first.key) == (0, "tap/crossed_ids")
        failing = {t.key for t in result.tensors if not t.ok}
        # the rows of other ids (compared on the union of ids) fail too, unless atol=1e9 hides them
        assert {"tap/crossed_ids", "grad/emb:0/indices"} <= failing <= {"tap/crossed_ids", "grad/emb:0/indices",
                                                                         "grad/emb:0"}
        assert first.stats.discrete and first.stats.mismatched == 6
        assert "compared exactly (integers" in result.report() and "would pass with" not in result.report()
