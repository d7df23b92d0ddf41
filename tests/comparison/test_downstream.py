"""What an update makes of a gradient's round-off (comparison/downstream.py), without
TensorFlow: an Adam variable whose gradient element at the noise floor changed sign moves a
learning rate the other way, and the golden's own rule says so; a port whose update or
gradient is wrong is not excused."""

from __future__ import annotations

import numpy as np
import pytest

from tracekit.comparison.arbiter import arbiter_tolerance
from tracekit.comparison.downstream import by_update, owner
from tracekit.comparison.stats import compare_values

F = np.float32
B1, B2, EPS, LR = F(0.9), F(0.999), F(1e-8), F(1e-3)
META = {"updates": {"w:0": {"update": "ApplyAdam", "lr": "lr", "hyper": {"beta1": float(B1), "beta2": float(B2),
                                                                       "epsilon": float(EPS)},
                            "state": {"beta1_power": "beta1_power:0", "beta2_power": "beta2_power:0"},
                            "attrs": {"use_nesterov": False, "use_locking": False}}},
        "slots": {"w/Adam:0": {"var": "w:0", "update": "ApplyAdam", "arg": "m"},
                  "w/Adam_1:0": {"var": "w:0", "update": "ApplyAdam", "arg": "v"},
                  "beta1_power:0": {}}}


def _adam(var, m, v, grad, t, epsilon=1e-8):
    """One float64 Adam step from step t's powers, as a float64 port computes it."""
    m = m + (grad - m) * (1 - 0.9)
    v = v + (grad ** 2 - v) * (1 - 0.999)
    alpha = 1e-3 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
    return var - m * alpha / (np.sqrt(v) + epsilon), m, v


def _case(grad_port, epsilon=1e-8):
    """The golden's state before step 1 (beta powers 0.9, 0.999: its first update), its step with
    gradient `golden`, and the float64 port's step from the same state with `grad_port`."""
    rng = np.random.RandomState(0)
    var = rng.randn(8).astype(F)
    zeros = np.zeros(8, F)
    before = {"var/w:0": var, "slot/w/Adam:0": zeros, "slot/w/Adam_1:0": zeros,
              "slot/beta1_power:0": B1, "slot/beta2_power:0": B2}
    grad = rng.randn(8).astype(F)
    grad[3] = F(1e-5)  # at the noise floor of a gradient of scale ~2 (42 ulps), yet far above Adam's epsilon
    g_var, g_m, g_v = (np.asarray(x, F) for x in _adam(var.astype(np.float64), 0.0, 0.0, grad.astype(np.float64), 1))
    golden = {"grad/w:0": grad, "var/w:0": g_var, "slot/w/Adam:0": g_m, "slot/w/Adam_1:0": g_v, "lr/lr": LR}
    p_var, p_m, p_v = _adam(var.astype(np.float64), 0.0, 0.0, grad_port, 1, epsilon)
    port = {"grad/w:0": grad_port, "var/w:0": p_var, "slot/w/Adam:0": p_m, "slot/w/Adam_1:0": p_v, "lr/lr": 1e-3}
    stats = {key: compare_values(np.asarray(golden[key]), np.asarray(port[key]),
                                 arbiter_tolerance().resolve(key.split("/")[0], key, 1, "float32"))
             for key in golden}
    return before, golden, port, stats


def _sign_flipped():
    grad = _case(np.zeros(8))[1]["grad/w:0"].astype(np.float64)
    grad[3] = -1e-5  # the other side of zero, by 2e-5 against a scale of ~2: round-off (84 ulps)
    return grad


def test_a_gradient_sign_at_the_noise_floor_moves_the_variable_a_learning_rate_and_the_rule_says_why():
    before, golden, port, stats = _case(_sign_flipped())
    assert stats["grad/w:0"].ok and not stats["var/w:0"].ok  # the update amplified round-off
    assert abs(golden["var/w:0"][3] - port["var/w:0"][3]) > 1e-3  # two learning rates apart
    judged, explained = by_update(META, before, golden, port, stats, arbiter_tolerance())
    assert explained == ("w:0",) and judged["var/w:0"].ok
    assert all(s.ok for s in judged.values()) and not stats["var/w:0"].ok  # the input is left as it was


@pytest.mark.parametrize("wrong", ["epsilon", "gradient", "no facts", "learning rate"])
def test_a_wrong_update_or_gradient_is_not_excused(wrong):
    grad = _sign_flipped()
    if wrong == "gradient":
        grad[0] *= 1.001
    before, golden, port, stats = _case(grad, epsilon=1e-7 if wrong == "epsilon" else 1e-8)
    meta = {"slots": META["slots"]} if wrong == "no facts" else META
    if wrong == "learning rate":
        golden = dict(golden, **{"lr/lr": F(2e-3)})  # the rule reads the golden's rate: the port's update is off
    judged, explained = by_update(meta, before, golden, port, stats, arbiter_tolerance())
    assert explained == () and not judged["var/w:0"].ok


def test_a_slot_belongs_to_its_variable_and_the_beta_powers_to_none():
    assert owner("slot/w/Adam_1:0", META["slots"]) == "w:0" and owner("var/w:0", {}) == "w:0"
    assert owner("slot/beta1_power:0", META["slots"]) is None and owner("grad/w:0", META["slots"]) is None
