"""The usual migration slips, recognized on synthetic traces: each fires on its own evidence,
with the numbers in the report, and stays quiet on near misses (another factor, another
difference), so a port that is wrong in some other way is not sent down the wrong path.
The real wrong ports are checked in tests/replay/test_ports.py."""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest

import tracekit
from tracekit.comparison import slips

from ..support import build_golden

BATCH = 4
REG = np.float32(0.0125)


def trace(path, change=None, steps=3, meta=None):
    """Inputs of batch BATCH, a loss with its regularization terms, a decaying learning rate,
    a batch-norm layer's moving mean (momentum 0.9), gradients and a kernel."""
    def training():
        mean = np.zeros(3, "f4")
        for k in range(steps):
            batch_mean = np.array([1.0, -2.0, 0.5], "f4") * (k + 1)
            mean = (np.float32(0.9) * mean + np.float32(0.1) * batch_mean).astype("f4")
            yield collections.OrderedDict([
                ("input/x:0", np.full((BATCH, 3), k, "f4")),
                ("random/dropout:0", np.linspace(0, 1, 6, dtype="f4") + k),
                ("tap/hidden", np.ones((BATCH, 3), "f4") * k),
                ("loss/loss", np.float32(2.0 / (k + 1)) + REG),
                ("loss/regularization", REG),
                ("loss/dense/kernel/Regularizer/mul:0", REG),
                ("lr/learning_rate", np.float32(0.1 * 0.5 ** k)),
                ("grad/dense/kernel:0", np.full((3, 3), 0.25, "f4")),
                ("var/dense/kernel:0", np.full((3, 3), 1.0 - 0.1 * k, "f4")),
                ("var/bn/moving_mean:0", mean),
            ])
    initial = {"var/dense/kernel:0": np.ones((3, 3), "f4"), "var/bn/moving_mean:0": np.zeros(3, "f4")}
    return build_golden(path, training(), initial, change=change, meta=meta)


@pytest.fixture
def golden(tmp_path):
    return trace(str(tmp_path / "golden.h5"))


def slip_of(golden, tmp_path, change, meta=None):
    actual = trace(str(tmp_path / "actual.h5"), change=change, meta=meta)
    result = tracekit.compare(golden, actual)
    assert not result.ok
    json.dumps(result.to_dict(by_step=False), allow_nan=False)  # hints are plain data too
    return result, [h.code for h in result.slips]


def at(key, step, edit):
    return lambda k, name, value: edit(value) if (name == key and k == step) else value


@pytest.mark.parametrize("edit, code, text", [
    (lambda v: v - REG, slips.REGULARIZATION_MISSING, "left out. At step 1, loss/loss is 1.0125 in the golden, 1"),
    (lambda v: v + REG, slips.REGULARIZATION_DOUBLED, "added twice"),
    (lambda v: v * BATCH, slips.LOSS_SUMMED, "a factor of the batch size, 4"),
    (lambda v: v / BATCH, slips.LOSS_AVERAGED, "Use reduction='sum'"),
])
def test_loss_slips(golden, tmp_path, edit, code, text):
    result, codes = slip_of(golden, tmp_path, at("loss/loss", 1, edit))
    assert codes == [code] and text in result.report()


@pytest.mark.parametrize("edit", [lambda v: v - 2 * REG, lambda v: v * 3, lambda v: v + 0.3])
def test_loss_off_by_something_else_is_no_slip(golden, tmp_path, edit):
    assert slip_of(golden, tmp_path, at("loss/loss", 1, edit))[1] == []


@pytest.mark.parametrize("factor, shift, word", [(0.5, 1, "ahead"), (2.0, -1, "behind")])
def test_learning_rate_one_step_off(golden, tmp_path, factor, shift, word):
    result, codes = slip_of(golden, tmp_path, at("lr/learning_rate", 1, lambda v: v * np.float32(factor)))
    assert codes == [slips.LR_SHIFTED] and result.slips[0].evidence["shift"] == shift
    assert "one step %s. At step 1, lr/learning_rate is" % word in result.report()
    assert slip_of(golden, tmp_path, at("lr/learning_rate", 1, lambda v: v * np.float32(0.7)))[1] == []


def test_batch_norm_momentum(golden, tmp_path):
    def momentum_099(k, name, value):  # the first update with momentum 0.99: a tenth of the move
        return (value * np.float32(0.1)).astype("f4") if name == "var/bn/moving_mean:0" and k == 0 else value
    result, codes = slip_of(golden, tmp_path, momentum_099)
    assert codes == [slips.BN_MOMENTUM] and result.slips[0].evidence["ratio"] == pytest.approx(0.1, rel=1e-5)
    assert "moved 0.1 times as far as in the golden" in result.report()
    def and_forward(k, name, value):  # moving statistics off while the forward pass differs too
        return value + np.float32(1) if name == "tap/hidden" and k == 0 else momentum_099(k, name, value)
    assert slip_of(golden, tmp_path, and_forward)[1] == []

    def uneven(k, name, value):  # off element by element in no common proportion
        if name == "var/bn/moving_mean:0" and k == 0:
            return value * np.array([0.1, 0.5, 2.0], "f4")
        return value
    assert slip_of(golden, tmp_path, uneven)[1] == []


@pytest.mark.parametrize("mode, text", [("none", "the replay ran with random='none'"),
                                        ("tape", "the port's random op did not take the golden's draws")])
def test_random_draws(golden, tmp_path, mode, text):
    result, codes = slip_of(golden, tmp_path, at("random/dropout:0", 0, lambda v: v + 1),
                            meta={"replay": {"random": mode}})
    assert codes == [slips.RANDOM_DRAWS] and text in result.report()


def test_other_tensors_and_matches_get_no_slip(golden, tmp_path):
    assert slip_of(golden, tmp_path, at("grad/dense/kernel:0", 0, lambda v: v * 2))[1] == []
    assert slip_of(golden, tmp_path, at("tap/hidden", 2, lambda v: v + 1))[1] == []
    assert tracekit.compare(golden, golden).slips == []


def test_a_loss_the_recorder_found_racy_names_the_race_unless_it_recomputed_it(tmp_path):
    # the TF1 step read the kernel for its fetched loss unordered with the kernel's update
    race = {"tensor": "loss/loss", "variable": "dense/kernel:0", "read": "L2Loss", "update": "Adam/ApplyAdam"}
    golden = trace(str(tmp_path / "racy.h5"), meta={"races": [race]})
    result, codes = slip_of(golden, tmp_path, at("loss/loss", 1, lambda v: v * 1.01))
    assert codes == [slips.READ_RACE] and result.slips[0].evidence["race"] == race
    assert "a race in the TF1 training step, not necessarily the port. loss/loss reads dense/kernel:0 (op L2Loss)" \
        in result.report()
    # recomputed from the state the step started from, the golden's loss is what a port computes: the
    # usual slips speak (here, the regularization left out)
    recomputed = trace(str(tmp_path / "recomputed.h5"), meta={"races": [race], "recomputed": {"loss/loss": 3}})
    _, codes = slip_of(recomputed, tmp_path, at("loss/loss", 1, lambda v: v - REG))
    assert codes == [slips.REGULARIZATION_MISSING]


def _skipping(tmp_path, name, skipped, port_skips=False, port_rate=0.1):
    """A loss-scale run: at the steps in `skipped` TF1's gradients overflowed (NaN) and it left w
    and its slot as they were; the port's gradients are finite everywhere, and it applies them
    (unless `port_skips`: it skips the same steps) at its rate (TF1's: 0.1)."""
    rs = np.random.RandomState(3)
    w0 = rs.randn(4).astype("f4")
    grads = [rs.randn(4).astype("f4") for _ in range(3)]

    def steps(tf1):
        w, m = w0.copy(), np.zeros(4, "f4")
        for k, g in enumerate(grads):
            skip = k in skipped and (tf1 or port_skips)
            if not skip:
                m = (0.9 * m + g).astype("f4")
                w = (w - (0.1 if tf1 else port_rate) * m).astype("f4")
            yield {"grad/w:0": np.full(4, np.nan, "f4") if tf1 and k in skipped else g, "var/w:0": w.copy(),
                   "slot/w/Momentum:0": m.copy(), "loss/loss": np.float32(k), "var/current_loss_scale:0":
                   np.float32(2.0 ** (15 - len([s for s in skipped if s <= k])))}
    initial = {"var/w:0": w0, "slot/w/Momentum:0": np.zeros(4, "f4"), "var/current_loss_scale:0": np.float32(2 ** 15)}
    meta = {"slots": {"w/Momentum:0": {"var": "w:0", "update": "ApplyMomentum", "arg": "accum"}}}
    golden = build_golden(str(tmp_path / (name + "_golden.h5")), steps(True), initial=initial, meta=meta)
    actual = build_golden(str(tmp_path / (name + "_port.h5")), steps(False), initial=initial,
                          meta={"replay": {"forcing": "state"}})
    return tracekit.compare(golden, actual)


def test_a_step_tf1_skipped_and_the_port_applied_is_named(tmp_path):
    result = _skipping(tmp_path, "skipped", skipped={1})
    assert not result.ok and result.first_divergence.step == 1
    hint, = [h for h in result.slips if h.code == slips.SKIPPED_STEP]
    assert hint.evidence["nonfinite"] == 1 and hint.evidence["loss_scale"] == 2.0 ** 14
    assert hint.evidence["port_applied"] and "the port applied its finite ones" in result.report()


def test_a_port_that_skips_the_same_step_is_told_only_the_gradients_differ(tmp_path):
    # the port skips where TF1 did: its update agrees, its gradient is finite there (no loss scale)
    result = _skipping(tmp_path, "both", skipped={1}, port_skips=True)
    assert [t.key for t in result.tensors if not t.ok] == ["grad/w:0"]
    hint, = [h for h in result.slips if h.code == slips.SKIPPED_STEP]
    assert not hint.evidence["port_applied"] and "The port's update agrees" in result.report()


def test_a_golden_with_no_skipped_step_names_none(tmp_path):
    result = _skipping(tmp_path, "none", skipped=set(), port_rate=0.2)  # the port departs, by its rate
    assert not result.ok and not [h for h in result.slips if h.code == slips.SKIPPED_STEP]
