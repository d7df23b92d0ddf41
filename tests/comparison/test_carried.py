"""Round-off an update carries (tracekit.comparison.carried; numpy only): an Adagrad accumulator
that fails its own tolerance only because its gradient's accepted difference was squared is
accepted, verified by the golden's update rule; an update that is not the golden's is not."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.comparison.carried import carried
from tracekit.comparison.noise import UPDATE

VAR, SLOT, LR = "w:0", "w/Adagrad:0", "lr:0"


class _Golden:
    meta = {"updates": {VAR: {"update": "ApplyAdagrad", "lr": LR, "hyper": {}, "state": {},
                              "attrs": {"update_slots": True, "use_locking": False}}},
            "slots": {SLOT: {"var": VAR, "update": "ApplyAdagrad", "arg": "accum"}}}


def _step(w, accum, g, lr):
    """TF1's ApplyAdagrad in float32: accum += g^2; w -= lr * g / sqrt(accum)."""
    accum = (accum + g * g).astype(np.float32)
    return (w - np.float32(lr) * g / np.sqrt(accum)).astype(np.float32), accum


def _case(seed, size=64, nudge=1):
    rng = np.random.RandomState(seed)
    w0 = rng.randn(size).astype(np.float32)
    a0 = np.full(size, 0.1, np.float32)
    g = (rng.randn(size) * 300).astype(np.float32)  # a SUM loss's gradient: squares reach 1e5
    g_port = g.copy()
    g_port[0] = np.nextafter(g[0], np.float32(np.inf), dtype=np.float32)  # another kernel's last bit
    for _ in range(nudge - 1):
        g_port[0] = np.nextafter(g_port[0], np.float32(np.inf), dtype=np.float32)
    start = {"var/" + VAR: w0, "slot/" + SLOT: a0}
    return start, g, g_port, w0, a0


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2 ** 16), nudge=st.integers(1, 8))
def test_an_accumulator_carrying_its_gradients_round_off_is_accepted(seed, nudge):
    start, g, g_port, w0, a0 = _case(seed, nudge=nudge)
    w1, a1 = _step(w0, a0, g_port, 0.01)
    actual = {"grad/" + VAR: g_port, "lr/" + LR: np.float32(0.01), "var/" + VAR: w1, "slot/" + SLOT: a1}
    found = carried(_Golden(), 0, ["slot/" + SLOT], {"grad/" + VAR, "lr/" + LR}, actual, start)
    assert set(found) == {"slot/" + SLOT} and found["slot/" + SLOT].link == UPDATE
    assert found["slot/" + SLOT].source == "grad/" + VAR


def test_another_update_or_a_failing_input_is_not_carried():
    start, g, g_port, w0, a0 = _case(7)
    lr = np.float32(0.01)
    # Keras' Adagrad with its epsilon folded into the accumulator's start of 0: another update
    w1, a1 = _step(w0, np.zeros_like(a0), g_port, 0.01)
    actual = {"grad/" + VAR: g_port, "lr/" + LR: lr, "var/" + VAR: w1, "slot/" + SLOT: a1}
    passed = {"grad/" + VAR, "lr/" + LR}
    assert carried(_Golden(), 0, ["slot/" + SLOT], passed, actual, start) == {}
    w1, a1 = _step(w0, a0, g_port, 0.02)  # another learning rate than the step says it used
    actual.update({"var/" + VAR: w1, "slot/" + SLOT: a1})
    assert carried(_Golden(), 0, ["var/" + VAR], passed, actual, start) == {}
    w1, a1 = _step(w0, a0, g_port, 0.01)
    actual.update({"var/" + VAR: w1, "slot/" + SLOT: a1})
    # the update agrees, but its gradient failed (or the learning rate did): nothing is carried
    assert carried(_Golden(), 0, ["slot/" + SLOT], {"lr/" + LR}, actual, start) == {}
    assert carried(_Golden(), 0, ["slot/" + SLOT], {"grad/" + VAR}, actual, start) == {}
    # a golden without update facts says nothing
    bare = type("Bare", (), {"meta": {}})()
    assert carried(bare, 0, ["slot/" + SLOT], passed, actual, start) == {}
