"""An L2 term added to the gradient inside Adam (torch.optim.Adam's weight_decay=), named by
comparison/adam_l2.py, on synthetic teacher-forced traces: a golden trained by TF1's Adam (bias
correction in the step size, epsilon before it, optionally a decoupled decay as BERT's
AdamWeightDecay has), a port that feeds g + wd W to the moments from a generated step on, its
epsilon where TF1 adds it or after the bias correction (torch's), TF1's decoupled decay kept or
left out. The gradient each side records is the one before the term, as torch's .grad is.
The term must be named with its coefficient; an epsilon's slip and round-off must not be."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracekit
from tracekit.comparison import adam_l2
from tracekit.comparison.adam_l2 import ADAM_L2
from tracekit.comparison import fingerprints as fp
from tracekit.comparison.tolerance import Tolerance

from .test_fingerprints_more import compared

F4 = np.float32
B1, B2 = 0.9, 0.999


def adam(w, g, m, v, t, lr, eps, wd=0.0, after=False, decay=0.0):
    """TF1's Adam at step count t on g + wd W (wd 0: TF1's own), epsilon after the bias correction
    where `after` (torch's), minus a decoupled decay W; float32 as both frameworks compute it."""
    g2 = (g + F4(wd) * w).astype("f4")
    m = (F4(B1) * m + F4(1 - B1) * g2).astype("f4")
    v = (F4(B2) * v + F4(1 - B2) * g2 * g2).astype("f4")
    lr_t = F4(lr * np.sqrt(1 - B2 ** t) / (1 - B1 ** t))
    e = F4(eps * np.sqrt(1 - B2 ** t)) if after else F4(eps)
    return (w - lr_t * m / (np.sqrt(v) + e) - F4(decay) * w).astype("f4"), m, v


def traces(tmp_path, seed, wd, at, eps=1e-7, after=False, decay=0.0, kept=True, port_eps=None, steps=3,
           lr=1e-3, shapes=(("w:0", (6, 16)), ("b:0", (16,)))):
    """The comparison of a TF1 Adam golden and a teacher-forced port that adds wd W to its
    gradient inside the optimizer from step `at` on (port_eps: its epsilon, the golden's unless given)."""
    rs = np.random.RandomState(seed)
    state = {name: rs.randn(*shape).astype("f4") for name, shape in shapes}
    slots = {name: (np.zeros_like(w), np.zeros_like(w)) for name, w in state.items()}
    meta_slots = {"%s/%s:0" % (n[:-2], arg): {"var": n, "arg": arg} for n in state for arg in ("m", "v")}
    initial = {"var/" + n: w.copy() for n, w in state.items()}
    initial.update({"slot/%s/%s:0" % (n[:-2], arg): np.zeros_like(w) for n, w in state.items() for arg in "mv"})
    golden_steps, port_steps = [], []
    low = np.log10(wd) if wd else -3.0
    for k in range(steps):
        common = {"input/x:0": rs.randn(4, 3).astype("f4"), "loss/loss": F4(1.0 / (k + 1)), "lr/learning_rate": F4(lr)}
        g_out, p_out = dict(common), dict(common)
        for name, w in list(state.items()):
            g = (rs.randn(*w.shape) * 10.0 ** rs.uniform(low - 1, low + 1, w.shape)).astype("f4")
            m, v = slots[name]
            new = adam(w, g, m, v, k + 1, lr, eps, decay=decay)
            port = adam(w, g, m, v, k + 1, lr, port_eps or eps, wd, after, decay if kept else 0.0) if k >= at else new
            for out, (value, m_out, v_out) in ((g_out, new), (p_out, port)):
                out.update({"grad/" + name: g, "var/" + name: value, "slot/%s/m:0" % name[:-2]: m_out,
                            "slot/%s/v:0" % name[:-2]: v_out})
            state[name], slots[name] = new[0], new[1:]
        golden_steps.append(g_out)
        port_steps.append(p_out)
    return compared(tmp_path, golden_steps, port_steps, initial, meta_slots)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 31 - 1), wd=st.sampled_from([0.1, 0.01, 0.001, 1e-4]), at=st.integers(0, 2),
       eps=st.sampled_from([1e-8, 1e-7, 1e-6]), after=st.booleans(),
       decoupled=st.sampled_from(["none", "kept", "left out"]))
def test_the_term_is_named_with_its_coefficient(tmp_path, seed, wd, at, eps, after, decoupled):
    decay = 0.0 if decoupled == "none" else 1e-4
    result = traces(tmp_path, seed, wd, at, eps, after, decay, kept=decoupled != "left out")
    assert not result.ok and result.first_divergence.step == at, result.report()
    assert [f.code for f in result.fingerprints] == [ADAM_L2], result.report()
    found = result.fingerprints[0]
    # snapped to the usual value where it explains as well; where an element's g + wd W is near zero, its
    # float32 rounding may move the fit off it, within the digits the report gives
    assert found.port == pytest.approx(wd, rel=1e-2) and found.golden == 0.0 and "var/w:0" in found.keys, found
    # epsilon's place is claimed only where TF1's place does not explain it (where |g| is near it)
    assert found.detail["after_correction"] in ((0, at + 1) if after else (0,)), found
    assert found.detail["decoupled_kept"] == (0.0 if decoupled == "left out" else 1.0), found
    text = result.report()
    assert "named cause: an L2 term added to the gradient inside the optimizer" in text, text
    assert ("g + %.3g x var" % wd) in text and ("apart from it" in text) == (decoupled == "left out"), text


@pytest.mark.parametrize("at", [0, 2])
def test_another_epsilon_is_not_named_an_l2_term(tmp_path, at):
    result = traces(tmp_path, 3, 0.0, at, eps=1e-6, port_eps=1e-8)
    assert not result.ok and result.first_divergence.step == at, result.report()
    codes = [f.code for f in result.fingerprints]
    assert codes == [fp.EPSILON], result.report()


def test_round_off_and_the_goldens_own_update_are_not_named(tmp_path):
    # The golden's update itself, and it one float32 ulp off on every element: no term to name.
    traces(tmp_path, 5, 0.01, at=1)
    with tracekit.open(str(tmp_path / "golden.h5")) as golden:
        before, recorded = golden.state_before(1), golden.step(1)
        moments = fp.adam.moments(golden, "w:0", before, recorded)
        assert moments is not None
        start, g_value = before["var/w:0"], recorded["var/w:0"]
        tol = Tolerance().resolve("var", "w:0", 1, "float32")
        for port in (g_value, np.nextafter(g_value, np.inf, dtype=np.float32)):
            assert adam_l2.fit("var/w:0", start, g_value, port, tol, recorded, moments, (2,), fp.EPSILONS) is None
        # the port's real update is named, so the call above could have named it
        port = adam(start, recorded["grad/w:0"], *(before["slot/w/%s:0" % a] for a in "mv"), 2, 1e-3, 1e-7, 0.01)[0]
        assert adam_l2.fit("var/w:0", start, g_value, port, tol, recorded, moments, (2,), fp.EPSILONS).port == 0.01
