"""A conversion's variants (replay/conversions.py) and the replays that try them at a failing step
(judge/variants.py), framework-free: the LSTM conversions' variants compute what their cell would
compute read the other way, a variant is swapped in wherever the options give its conversion, and
a cause is named only where the step alone fails as the port is and passes with the variant."""

from __future__ import annotations

import itertools
import types

import numpy as np
import pytest

from tracekit.comparison.fingerprints import VARIANT
from tracekit.judge.variants import Setting, conversions_in, name_by_variants, one_step
from tracekit.replay import conversions
from tracekit.replay.conversions import FORGET_BIAS, GATE_ORDER, forget_offset, gates, ungates
from tracekit.report.fingerprints import fingerprint
from tracekit.store import open_trace

from ..support import golden

I, U = 3, 4


def _keras_lstm():
    var = lambda shape: types.SimpleNamespace(shape=shape, name="v")  # noqa: E731
    cell = types.SimpleNamespace(kernel=var((I, 4 * U)), recurrent_kernel=var((U, 4 * U)), bias=var((4 * U,)))
    return types.SimpleNamespace(name="lstm", cell=cell)


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_gate_blocks_go_back_where_they_came_from_and_the_forget_bias_follows_tf1s_f_block(order):
    rng = np.random.RandomState(0)
    array = rng.randn(5, 4 * U).astype("f4")
    assert np.array_equal(ungates(gates(array, order), order), array)
    offset = forget_offset(U, 1.0, order)
    # the port's block holding TF1's f block (2) carries the forget bias, no other
    holding = [k for k in range(4) if order[k] == 2][0]
    assert offset[holding * U:(holding + 1) * U].tolist() == [1.0] * U and offset.sum() == U


def test_the_lstm_variants_compute_the_cell_read_the_other_way():
    conv = conversions.lstm("rnn/lstm_cell", _keras_lstm(), forget_bias=1.0)
    variants = {v.code: v for v in conv.variants()}
    assert sorted(variants) == [FORGET_BIAS, GATE_ORDER]
    rng = np.random.RandomState(1)
    g_kernel, g_bias = rng.randn(I + U, 4 * U).astype("f4"), rng.randn(4 * U).astype("f4")
    x, h, c = rng.randn(2, I), rng.randn(2, U), rng.randn(2, U)
    z_tf1 = np.split(np.concatenate([x, h], 1) @ g_kernel + g_bias, 4, 1)  # TF1's i, j, f, o

    def port_cell(conv, split):  # the port's cell on the weights the conversion loads, its gates split as `split`
        kernel, recurrent, bias = conv.values_to_port([g_kernel, g_bias])
        gate = dict(zip(split, np.split(x @ kernel + h @ recurrent + bias, 4, 1)))
        return _sigmoid(gate["f"]) * c + _sigmoid(gate["i"]) * np.tanh(gate["g"])

    def tf1_cell(forget_bias):
        i, j, f, _ = z_tf1
        return _sigmoid(f + forget_bias) * c + _sigmoid(i) * np.tanh(j)

    np.testing.assert_allclose(port_cell(conv, "ifgo"), tf1_cell(1.0), atol=1e-5)
    # the forget-bias variant: the Keras cell computes TF1's cell with no forget bias
    without = variants[FORGET_BIAS].conversion
    np.testing.assert_allclose(port_cell(without, "ifgo"), tf1_cell(0.0), atol=1e-5)
    assert "forget_bias=1" in variants[FORGET_BIAS].port and variants[FORGET_BIAS].other.startswith("adds 0")
    # the gate-order variant: a cell that splits its gates as TF1's code does (i, j, f, o) computes TF1's cell
    kept = variants[GATE_ORDER].conversion
    np.testing.assert_allclose(port_cell(kept, "igfo"), tf1_cell(1.0), atol=1e-5)
    assert not np.allclose(port_cell(conv, "igfo"), tf1_cell(1.0), atol=1e-3)
    # a variant has variants of its own: the forget bias back at 1, the order back to Keras'
    back = {v.code: v.conversion for v in without.variants()}
    np.testing.assert_allclose(port_cell(back[FORGET_BIAS], "ifgo"), tf1_cell(1.0), atol=1e-5)
    assert [v.code for v in kept.variants()] == [FORGET_BIAS]  # TF1's order kept: no other order offered
    # each reads its own values back as the golden's
    for each in (conv, without, kept):
        back_kernel, back_bias = each.values_to_golden(each.values_to_port([g_kernel, g_bias]))
        assert np.array_equal(back_kernel, g_kernel)
        np.testing.assert_allclose(back_bias, g_bias, atol=2e-7)


def test_a_variant_is_swapped_in_wherever_the_options_give_its_conversion():
    conv = conversions.lstm("rnn/lstm_cell", _keras_lstm())
    other = conversions.transpose("d/kernel:0", types.SimpleNamespace(shape=(2, 3), name="w"))
    for options in ({"convert": [other, conv]}, {"var_map": {"rnn/lstm_cell/kernel:0": conv, "x:0": "y"}},
                    {"var_map": [(r"^rnn/lstm_cell/", conv), ("x", "y")], "convert": [other]}):
        found = conversions_in(options)
        assert conv in found
        picked = one_step(dict(options, steps=3, progress=None), (found.index(conv), 0))
        assert "steps" not in picked and "progress" not in picked
        now = conversions_in(picked)
        assert conv not in now and (other in now) == (other in found)
        swapped_in = [c for c in now if c is not other]
        assert len(swapped_in) == 1 and swapped_in[0] is not conv
        assert swapped_in[0].describe == conv.describe and swapped_in[0].port == conv.port


class _Result:
    def __init__(self, ok, step=0):
        self.ok, self.fingerprints = ok, []
        self.first_divergence = None if ok else types.SimpleNamespace(step=step)


def _named(result, conv, passes):
    """name_by_variants with a rerun that passes for the picks in `passes` (None: the port as it is)."""
    asked = []

    def rerun(excerpt, pick):
        assert len(excerpt) == 1  # one step, excerpted
        asked.append(pick)
        return types.SimpleNamespace(ok=pick in passes)
    with open_trace(golden("lstm_model")) as trace:
        name_by_variants(result, trace, [conv], rerun)
    return asked


def test_a_cause_is_named_only_where_the_step_alone_fails_and_a_variant_passes():
    conv = conversions.lstm("rnn/lstm_cell", _keras_lstm(), forget_bias=0.0)
    result = _Result(False, step=3)
    assert _named(result, conv, {(0, 0)}) == [None, (0, 0), (0, 1)]
    (hint,) = result.fingerprints
    assert (hint.code, hint.step, hint.keys) == (FORGET_BIAS, 3, ("var/rnn/lstm_cell/kernel:0",
                                                                  "var/rnn/lstm_cell/bias:0"))
    text = fingerprint(hint)
    assert text.startswith("named cause, verified by a replay: lstm-forget-bias"), text
    assert "; step 3 replayed alone" in text, text
    assert "adds forget_bias=0 to the f gate" in text and hint.detail[VARIANT] in text
    # the step alone passes as the port is: the divergence came with the state before it; nothing named
    result = _Result(False)
    assert _named(result, conv, {None, (0, 0)}) == [None] and result.fingerprints == []
    # no variant passes: nothing named
    result = _Result(False)
    assert _named(result, conv, set()) == [None, (0, 0), (0, 1)] and result.fingerprints == []
    # a passing check, or one that differs in the initial state (no step to replay): nothing replayed
    for result in (_Result(True), _Result(False, step=-1)):
        assert _named(result, conv, set()) == [] and result.fingerprints == []
    # conversions without variants: nothing replayed
    plain = conversions.transpose("d/kernel:0", types.SimpleNamespace(shape=(2, 3), name="w"))
    with open_trace(golden("lstm_model")) as trace:
        name_by_variants(_Result(False), trace, [plain], lambda excerpt, pick: pytest.fail("replayed"))


def test_a_setting_of_the_ports_modules_is_named_only_where_its_replay_passes():
    # an adapter's settings (a PyTorch BatchNorm's epsilon) are tried as the conversions' variants:
    # handed to the rerun as they are, named only where the step alone fails as the port is
    settings = [Setting("batch-norm-epsilon", "BatchNorm module bn", "adds eps=1e-05 to the variance",
                        "adds eps=%g" % eps, lambda: pytest.fail("applied by the rerun, not the core"))
                for eps in (1e-3, 1.001e-5)]
    texts = []
    for passes, named in (({settings[0]}, [settings[0]]), ({None, settings[0]}, []), (set(), [])):
        result, asked = _Result(False, step=2), []

        def rerun(excerpt, pick):
            asked.append(pick)
            return types.SimpleNamespace(ok=pick in passes)
        with open_trace(golden("lstm_model")) as trace:
            name_by_variants(result, trace, [], rerun, settings)
        assert asked == ([None] if None in passes else [None] + settings)
        assert [(h.code, h.step, h.detail[VARIANT], h.detail["setting"]) for h in result.fingerprints] == \
            [(s.code, 2, s.other, s.where) for s in named]
        texts += [fingerprint(h) for h in result.fingerprints]
    assert texts[0].startswith("named cause, verified by a replay: batch-norm-epsilon, in the port's BatchNorm "
                               "module bn. The port adds eps=1e-05 to the variance; step 2 replayed alone"), texts
    assert texts[0].endswith("where it adds eps=0.001"), texts
