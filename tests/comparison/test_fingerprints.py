"""Slip fingerprints on synthetic teacher-forced traces: a TF1-style Adam with decoupled weight
decay (google-research/bert's update) recorded, and a port that departs from it in one known way
from a generated step on. Each slip must be named with its parameter; a correct port, and one
wrong in a way no transformation explains, get no name. The real ports are in
tests/replay/test_fingerprint_ports.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracekit
from tracekit.comparison import adam
from tracekit.comparison import fingerprints as fp

from ..support import build_golden

SLOTS = {"w/adam_m:0": {"var": "w:0", "arg": "adam_m"}, "w/adam_v:0": {"var": "w:0", "arg": "adam_v"},
         "b/adam_m:0": {"var": "b:0", "arg": "adam_m"}, "b/adam_v:0": {"var": "b:0", "arg": "adam_v"}}
B1, B2 = np.float32(0.9), np.float32(0.999)


def training(seed, steps, shape, lr, epsilon=1e-6, decay=0.01, batch=4):
    """The golden's steps and initial state: Adam without bias correction, the kernel w decayed,
    the bias b not (BERT's optimizer excludes biases)."""
    rs = np.random.RandomState(seed)
    state = {"w:0": rs.randn(*shape).astype("f4"), "b:0": (rs.randn(shape[-1]) * 0.1).astype("f4")}
    moments = {name: [np.zeros_like(v), np.zeros_like(v)] for name, v in state.items()}
    initial = {"var/" + n: v.copy() for n, v in state.items()}
    initial.update({"slot/%s/adam_%s:0" % (n[:-2], r): m[i].copy() for n, m in moments.items()
                    for i, r in enumerate("mv")})

    def steps_():
        for k in range(steps):
            out = {"input/x:0": rs.randn(batch, 3).astype("f4"), "loss/loss": np.float32(1.0 / (k + 1)),
                   "lr/learning_rate": np.float32(lr)}
            for name, w in list(state.items()):
                grad = (rs.randn(*w.shape) * 10.0 ** rs.uniform(-6, -2, w.shape)).astype("f4")
                m, v = moments[name]
                m = (B1 * m + (1 - B1) * grad).astype("f4")
                v = (B2 * v + (1 - B2) * grad * grad).astype("f4")
                out["grad/" + name] = grad
                out["slot/%s/adam_m:0" % name[:-2]], out["slot/%s/adam_v:0" % name[:-2]] = m, v
                state[name] = _update(w, m, v, lr, epsilon, decay if name == "w:0" else 0.0)
                out["var/" + name] = state[name]
                moments[name] = [m, v]
            yield out
    return steps_(), initial


def _update(w, m, v, lr, epsilon, decay, factor=1.0):
    """google-research/bert's AdamWeightDecay step in float32; `factor` scales its Adam part."""
    lr = np.float32(lr)
    step = lr * np.float32(factor) * (m / (np.sqrt(v) + np.float32(epsilon)))
    return (w - (step + lr * np.float32(decay) * w)).astype("f4")


def traces(tmp_path, seed, slip, at, steps=4, shape=(16, 8), lr=1e-3, epsilon=1e-6, noise=1e-4, forcing="state",
           settings=None):
    """The golden and a teacher-forced port trace of `slip` from step `at` (its meta says the
    replay was forced as `forcing` says, and the port's optimizers have `settings`)."""
    golden_steps, initial = training(seed, steps, shape, lr, epsilon=epsilon)
    golden = build_golden(str(tmp_path / "golden.h5"), golden_steps, initial, meta={"slots": SLOTS})
    # the port from the golden's state at every step: the golden's values, its own update of them
    with tracekit.open(golden) as trace:
        forced = [trace.step(k) for k in range(steps)]
        states = [trace.state_before(k) for k in range(steps)]

        def port_steps():
            for k in range(steps):
                yield {key: _port_value(states[k], forced[k], key, slip if k >= at else None, k, lr, epsilon, noise)
                       for key in forced[k]}
        actual = build_golden(str(tmp_path / "actual.h5"), port_steps(), initial, meta=dict(
            {"slots": SLOTS}, replay={"forcing": forcing, "optimizer_settings": settings or {}}))
    return golden, actual


def _port_value(state, recorded, key, slip, k, lr, epsilon, noise):
    """The port's value of `key` at step k from the golden's state, moments and gradient."""
    kind, name = key.split("/", 1)
    if kind == "grad" and slip in ("sum", "l2"):
        grad = recorded[key]
        return (grad * np.float32(4) if slip == "sum" else grad + np.float32(1e-2) * state["var/" + name]).astype("f4")
    if kind != "var" or slip in (None, "sum", "l2"):
        return recorded[key]
    w, base = state[key], name[:-2]
    m, v = recorded["slot/%s/adam_m:0" % base], recorded["slot/%s/adam_v:0" % base]
    decay = 0.01 if name == "w:0" or slip == "decay-all" else 0.0
    factor = {"lr": 0.5, "sign": -1.0, "bias-correction": np.sqrt(1 - B2 ** (k + 1)) / (1 - B1 ** (k + 1))}
    value = _update(w, m, v, lr * (0.5 if slip == "lr" else 1.0), 1e-8 if slip == "epsilon" else epsilon,
                    0.0 if slip == "decay-missing" else decay * (2.0 if slip == "lr" else 1.0),
                    factor.get(slip, 1.0) if slip != "lr" else 1.0)
    if slip == "roundoff":  # right, rounded once from float64 (a fused kernel): the last bit differs
        w64, m64, v64 = (np.float64(x) for x in (w, m, v))
        return (w64 - np.float64(np.float32(lr)) * (m64 / (np.sqrt(v64) + epsilon) + decay * w64)).astype("f4")
    if slip == "noise":  # wrong, but in no known way (a stream no golden's seed draws: an array seed)
        value = (value + np.float32(noise) * np.random.RandomState([7, k]).randn(*w.shape)).astype("f4")
    return value


EXPECTED = {
    "epsilon": (fp.EPSILON, ("var/w:0", "var/b:0"), 1e-6, 1e-8),
    "lr": (fp.LR_FACTOR, ("var/w:0", "var/b:0"), 1.0, 0.5),
    "decay-all": (fp.DECAY_ADDED, ("var/b:0",), 0.0, 0.01),
    "decay-missing": (fp.DECAY_MISSING, ("var/w:0",), 0.01, 0.0),
    "bias-correction": (fp.BIAS_CORRECTION, ("var/w:0", "var/b:0"), 0.0, 1.0),
    "sign": (fp.SIGN, ("var/w:0", "var/b:0"), 1.0, -1.0),
    "sum": (fp.GRAD_SCALE, ("grad/w:0", "grad/b:0"), 1.0, 4.0),
    "l2": (fp.L2_IN_LOSS, ("grad/w:0", "grad/b:0"), 0.0, 0.01),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 31 - 1), slip=st.sampled_from(sorted(EXPECTED)), at=st.integers(0, 2),
       rows=st.integers(2, 20), cols=st.integers(16, 24), lr=st.sampled_from([1e-4, 1e-3, 1e-2]))
def test_a_slip_is_named_with_its_parameter(tmp_path, seed, slip, at, rows, cols, lr):
    # b has 16 elements or more, w 32: enough for the fits and the proportion (fingerprints.proportional)
    golden, actual = traces(tmp_path, seed, slip, at, shape=(rows, cols), lr=lr)
    result = tracekit.compare(golden, actual)
    if result.ok:  # a decay of lr x 0.01 of the value, near the 8 ulps the proportion is held from, may pass
        assert slip in ("decay-all", "decay-missing") and lr * 0.01 <= 16 * np.finfo(np.float32).eps
        return
    assert result.first_divergence.step >= at  # a small slip may stay within the tolerance a step or two
    code, keys, golden_value, port_value = EXPECTED[slip]
    named = [f for f in result.fingerprints if f.code == code]
    assert len(result.fingerprints) == 1 and named, (slip, result.fingerprints)
    found, = named
    assert set(found.keys) <= set(keys) and result.first_divergence.key in found.keys
    # an epsilon is fitted from the elements whose sqrt(v) is near it: a few of a small tensor's
    rel = 0.25 if slip == "epsilon" else 0.05
    assert found.golden == pytest.approx(golden_value, rel=rel, abs=1e-4 * rel) and \
        found.port == pytest.approx(port_value, rel=rel, abs=1e-4 * rel)
    assert "named cause" in result.report()
    json.dumps(result.to_dict(by_step=False), allow_nan=False)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 31 - 1), at=st.integers(0, 2), noise=st.sampled_from([1e-6, 1e-5, 1e-4, 1e-3, 1e-2]))
def test_a_difference_no_transformation_explains_gets_no_name(tmp_path, seed, at, noise):
    golden, actual = traces(tmp_path, seed, "noise", at, noise=noise)
    result = tracekit.compare(golden, actual)
    assert result.fingerprints == []
    assert result.ok or noise > 1e-6  # 1e-6 is within the tolerance; 1e-4 and more are not
    assert not result.ok or noise < 1e-4


def test_a_correct_port_gets_no_name(tmp_path):
    golden, actual = traces(tmp_path, 3, None, 0)
    result = tracekit.compare(golden, actual)
    assert result.ok and result.fingerprints == []


def test_the_bias_correction_is_matched_only_at_the_steps_count():
    # sqrt(1 - b2^t) / (1 - b1^t) takes most values over all t: 2.0 near t = 287 for Adam's defaults
    assert adam.bias_step(2.0, (0.9, 0.999), (1, 2, 3)) is None
    factor = float(np.sqrt(1 - 0.999 ** 3) / (1 - 0.9 ** 3))
    assert adam.bias_step(factor, (0.9, 0.999), (1, 3)) == (3, True)
    assert adam.bias_step(1 / factor, (0.9, 0.999), (3,)) == (3, False)


def test_too_few_elements_are_not_fitted(tmp_path):
    # one element "explains" any difference as a factor: a variable this small gets no name
    golden, actual = traces(tmp_path, 0, "epsilon", 0, shape=(1, 1))
    result = tracekit.compare(golden, actual)
    assert not result.ok and result.fingerprints == []


@pytest.mark.parametrize("slip", ["decay-all", "decay-missing"])
def test_a_decay_within_the_tolerance_is_caught_by_its_proportion(tmp_path, slip):
    # lr 3e-4 x 0.01: each step moves a weight by 3e-6 of itself (25 ulps), within the tolerance of one step
    golden, actual = traces(tmp_path, 5, slip, 1, shape=(32, 16), lr=3e-4)
    key = EXPECTED[slip][1][0]
    assert compare_values_of(golden, actual, key, 1).ok  # the plain comparison passes it
    result = tracekit.compare(golden, actual)
    assert not result.ok and result.first_divergence.step == 1
    assert "not round-off, whose signs go either way" in result.report()
    code, keys, golden_value, port_value = EXPECTED[slip]
    found, = result.fingerprints
    assert found.code == code and found.keys == keys
    assert found.golden == pytest.approx(golden_value, rel=0.05) and found.port == pytest.approx(port_value, rel=0.05)


@pytest.mark.parametrize("digests", [False, True])
def test_a_decay_of_a_few_ulps_a_step_is_held_to_its_proportion(tmp_path, digests):
    # BERT's rate: lr 5e-5 x 0.01 left out moves each weight by 5e-7 of itself, about 4 ulps
    golden, actual = sampled_traces(tmp_path, 5, "decay-missing", (48, 32), 5e-5) if digests else \
        traces(tmp_path, 5, "decay-missing", 0, shape=(32, 16), lr=5e-5)
    result = tracekit.compare(golden, actual)
    first = result.first_divergence
    assert (first.step, first.key) == (0, "var/w:0") and "not round-off" in first.stats.problem, result.report()
    found, = result.fingerprints
    assert found.code == fp.DECAY_MISSING and found.golden == pytest.approx(0.01, rel=0.05)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 31 - 1), lr=st.sampled_from([2e-5, 5e-5, 1e-4, 1e-3]), digests=st.booleans(),
       rows=st.integers(20, 60), cols=st.integers(16, 40))
def test_an_update_rounded_otherwise_is_not_a_proportion(tmp_path, seed, lr, digests, rows, cols):
    # the port's update rounded once from float64: its last bits differ, on some elements, either way
    golden, actual = sampled_traces(tmp_path, seed, "roundoff", (rows, cols), lr) if digests else \
        traces(tmp_path, seed, "roundoff", 0, shape=(rows, cols), lr=lr)
    result = tracekit.compare(golden, actual)
    assert result.ok and result.fingerprints == [], result.report()


def compare_values_of(golden, actual, key, step):
    from tracekit.comparison.stats import compare_values
    from tracekit.comparison.tolerance import Tolerance

    with tracekit.open(golden) as g, tracekit.open(actual) as a:
        return compare_values(g.step(step)[key], a.step(step)[key], Tolerance().resolve("var", key[4:], step, "float32"))


def test_the_proportion_is_not_held_where_the_replay_ran_from_its_own_state(tmp_path):
    golden, actual = traces(tmp_path, 5, "decay-all", 1, shape=(32, 16), lr=3e-4, forcing="none")
    assert tracekit.compare(golden, actual).ok  # step 1 did not start from the golden's state


def test_no_name_past_step_0_where_the_replay_ran_from_its_own_state(tmp_path):
    golden, actual = traces(tmp_path, 5, "epsilon", 1, forcing="none")
    result = tracekit.compare(golden, actual)
    assert not result.ok and result.first_divergence.step == 1 and result.fingerprints == []
    assert "not fitted to known slips: step 1 started from the port's own state" in result.report()


@pytest.mark.modern  # the HTML report draws with matplotlib, in the modern environment only
def test_the_html_report_names_the_cause(tmp_path):
    golden, actual = traces(tmp_path, 5, "decay-all", 1, shape=(32, 16), lr=3e-4)
    page = open(tracekit.compare(golden, actual).write_html(str(tmp_path / "report.html"))).read()
    assert "named cause: weight decay applied where TF1 applies none" in page


@pytest.mark.parametrize("has", [1e-6, 1e-8])
def test_a_cause_whose_advice_the_port_follows_is_not_named(tmp_path, has):
    # The port's update fits epsilon=1e-8 where TF1's is 1e-6: "pass epsilon=1e-6" is the advice.
    # A port whose optimizer has epsilon=1e-6 already contradicts it (something else moved its
    # update): not named, and a note says why. A port with 1e-8 gets the name.
    settings = {name: {"optimizer": "Adam", "settings": {"epsilon": ["epsilon", has]}} for name in ("w:0", "b:0")}
    golden, actual = traces(tmp_path, 11, "epsilon", 0, shape=(12, 20), settings=settings)
    result = tracekit.compare(golden, actual)
    assert not result.ok
    if has == 1e-6:
        assert result.fingerprints == [] and "named cause" not in result.report()
        assert any(note.startswith("not named:") and "epsilon=1e-06 already" in note for note in result.notes), \
            result.notes
        # and what fits instead, or that nothing tracekit knows does
        assert result.notes[-1].startswith(("what fits instead", "nothing else tracekit knows fits")), result.notes
    else:
        assert [f.code for f in result.fingerprints] == [fp.EPSILON]


# A golden under a size budget keeps digests at step 0 (a fixed sample of each large tensor and its
# statistics); the state it started from is whole. The kernel w, its gradient and its moments are
# kept so; the bias b (under the sample's size) whole.
SAMPLED_KEYS = ("var/w:0", "grad/w:0", "slot/w/adam_m:0", "slot/w/adam_v:0")


def _as_digests(path, out, keys=SAMPLED_KEYS):
    """The trace at `path` again, `keys` kept as digests at every step."""
    with tracekit.open(path) as trace:
        meta = {key: trace.meta[key] for key in ("slots", "replay") if key in trace.meta}
        with tracekit.create(out, meta=meta) as writer:
            with writer.initial():
                for key in trace.initial:
                    writer.add(*key.split("/", 1), value=trace.initial[key])
            for step in trace:
                with writer.step():
                    for key in step:
                        writer.add(*key.split("/", 1), value=step[key], digest=key in keys)
    return out


def sampled_traces(tmp_path, seed, slip, shape, lr, noise=1e-4):
    golden, actual = traces(tmp_path, seed, slip, 0, steps=2, shape=shape, lr=lr, noise=noise)
    return _as_digests(golden, str(tmp_path / "golden-digests.h5")), _as_digests(actual, str(tmp_path / "digests.h5"))


@settings(max_examples=24, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 31 - 1), slip=st.sampled_from(sorted(set(EXPECTED) - {"decay-all"})),
       rows=st.integers(40, 80), cols=st.integers(26, 40), lr=st.sampled_from([1e-3, 1e-2]))
def test_a_slip_at_a_digest_step_from_the_golden_state_is_named_from_the_samples(tmp_path, seed, slip, rows, cols, lr):
    golden, actual = sampled_traces(tmp_path, seed, slip, (rows, cols), lr)
    with tracekit.open(golden) as trace:
        assert set(trace.step(0).digests) == set(SAMPLED_KEYS) and not trace.step(0).digests["var/w:0"].whole
    result = tracekit.compare(golden, actual)
    assert not result.ok and result.first_divergence.step == 0, result.report()
    code, keys, golden_value, port_value = EXPECTED[slip]
    named = [f for f in result.fingerprints if f.code == code]
    assert len(result.fingerprints) == 1 and named, (slip, result.fingerprints)
    found, = named
    assert set(found.keys) <= set(keys)
    w = [key for key in found.keys if key.endswith("/w:0")]
    assert found.detail.get("sampled", 0) == len(w)  # fitted on w's sample, where w is among them
    rel = 0.25 if slip == "epsilon" else 0.05
    assert found.golden == pytest.approx(golden_value, rel=rel, abs=1e-4 * rel) and \
        found.port == pytest.approx(port_value, rel=rel, abs=1e-4 * rel)
    assert not w or "fitted on the elements a digest samples" in result.report()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 31 - 1), noise=st.sampled_from([None, 1e-4, 1e-3, 1e-2]))
def test_at_a_digest_step_a_correct_port_passes_and_a_difference_no_transformation_explains_gets_no_name(
        tmp_path, seed, noise):
    golden, actual = sampled_traces(tmp_path, seed, None if noise is None else "noise", (48, 32), 1e-3,
                                    noise=noise or 0.0)
    result = tracekit.compare(golden, actual)
    assert result.fingerprints == [] and result.ok == (noise is None), result.report()


def test_the_proportion_is_held_on_a_digest_s_sample(tmp_path):
    # lr 3e-4 x 0.01 left out of w's update: 3e-6 of each weight, within one step's tolerance (the
    # sample's elements and the statistics)
    golden, actual = sampled_traces(tmp_path, 5, "decay-missing", (48, 32), 3e-4)
    result = tracekit.compare(golden, actual)
    first = result.first_divergence
    assert (first.step, first.key, first.stats.basis) == (0, "var/w:0", "digest"), result.report()
    assert "on every sampled element: not round-off" in first.stats.problem
    found, = result.fingerprints
    assert found.code == fp.DECAY_MISSING and found.detail["sampled"] == 1


@pytest.mark.parametrize("lr", [5e-5, 1e-3])
def test_a_decay_left_out_where_the_adam_step_is_zero_is_a_decay_not_a_rate(tmp_path, lr):
    # a word embedding's unused rows: no gradient, zero moments, the golden's whole move is the decay;
    # a learning rate of 0 explains the port's unmoved rows as well: the decay is named
    rs = np.random.RandomState(3)
    w, b = rs.randn(32, 16).astype("f4"), (rs.randn(16) * 0.1).astype("f4")
    zero, grad_b = np.zeros_like(w), (rs.randn(16) * 1e-3).astype("f4")
    m_b, v_b = ((1 - B1) * grad_b).astype("f4"), ((1 - B2) * grad_b * grad_b).astype("f4")
    initial = {"var/w:0": w, "var/b:0": b, "slot/w/adam_m:0": zero, "slot/w/adam_v:0": zero,
               "slot/b/adam_m:0": np.zeros_like(b), "slot/b/adam_v:0": np.zeros_like(b)}
    step = {"input/x:0": rs.randn(4, 3).astype("f4"), "loss/loss": np.float32(1.0),
            "lr/learning_rate": np.float32(lr), "grad/w:0": zero, "grad/b:0": grad_b,
            "slot/w/adam_m:0": zero, "slot/w/adam_v:0": zero, "slot/b/adam_m:0": m_b, "slot/b/adam_v:0": v_b,
            "var/b:0": _update(b, m_b, v_b, lr, 1e-6, 0.0)}
    golden = build_golden(str(tmp_path / "golden.h5"), [dict(step, **{"var/w:0": _update(w, zero, zero, lr, 1e-6,
                                                                                            0.01)})],
                          initial, meta={"slots": SLOTS})
    actual = build_golden(str(tmp_path / "actual.h5"), [dict(step, **{"var/w:0": w})], initial,
                          meta={"slots": SLOTS, "replay": {"forcing": "state", "optimizer_settings": {}}})
    result = tracekit.compare(golden, actual)
    assert not result.ok and result.first_divergence.key == "var/w:0", result.report()
    found, = result.fingerprints
    assert found.code == fp.DECAY_MISSING and found.keys == ("var/w:0",), result.report()
    assert found.golden == pytest.approx(0.01, rel=0.05) and found.port == 0.0
