"""Weight conversions: Keras LSTM and GRU layers replay TF1 LSTMCell and GRUCell goldens
(goldens/lstm_model.h5, goldens/gru_model.h5, recorded on TF 1.15.5 by
tools/goldens/rnn_model.py), compared in the golden's layout; wrong ports are caught where
they depart; a shape mismatch names the conversion that fits."""

from __future__ import annotations

import types

import numpy as np
import pytest

import tracekit
from tools.ports import rnn_model
from tracekit.replay import conversions

from ..support import golden

I, U = 3, 6


def _var(shape):
    return types.SimpleNamespace(shape=shape, name="v")


def _keras_lstm():
    cell = types.SimpleNamespace(kernel=_var((I, 4 * U)), recurrent_kernel=_var((U, 4 * U)), bias=_var((4 * U,)))
    return types.SimpleNamespace(name="lstm", cell=cell)


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def test_the_lstm_conversion_computes_what_the_tf1_cell_computes():
    conv = conversions.lstm("rnn/lstm_cell", _keras_lstm(), forget_bias=1.0)
    conversions.bind([conv], {"rnn/lstm_cell/kernel:0": (I + U, 4 * U), "rnn/lstm_cell/bias:0": (4 * U,)},
                     lambda v: v.shape)
    rng = np.random.RandomState(0)
    g_kernel, g_bias = rng.randn(I + U, 4 * U).astype("f4"), rng.randn(4 * U).astype("f4")
    kernel, recurrent, bias = conv.values_to_port([g_kernel, g_bias])
    x, h, c = rng.randn(2, I), rng.randn(2, U), rng.randn(2, U)
    # TF1 LSTMCell: gates i, j, f, o from [x, h]; forget_bias added to f at run time
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ g_kernel + g_bias, 4, 1)
    c_tf1 = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
    # Keras LSTM: gates i, f, c, o from x and h separately
    i, f, cc, o2 = np.split(x @ kernel + h @ recurrent + bias, 4, 1)
    c_keras = _sigmoid(f) * c + _sigmoid(i) * np.tanh(cc)
    np.testing.assert_allclose(c_keras, c_tf1, atol=1e-5)
    np.testing.assert_allclose(_sigmoid(o2) * np.tanh(c_keras), _sigmoid(o) * np.tanh(c_tf1), atol=1e-5)
    back = conv.values_to_golden([kernel, recurrent, bias])
    assert np.array_equal(back[0], g_kernel)
    np.testing.assert_allclose(back[1], g_bias, atol=2e-7)  # + forget_bias - forget_bias: one rounding
    # gradients and slots are rearranged only: no forget bias in them
    grads = conv.deltas_to_port([g_kernel, g_bias])
    assert np.array_equal(grads[2][U:2 * U], g_bias[2 * U:3 * U])
    assert all(np.array_equal(a, b) for a, b in zip(conv.deltas_to_golden(grads), [g_kernel, g_bias]))


def test_transpose_and_reshape_round_trip():
    kernel = np.arange(6, dtype="f4").reshape(3, 2)
    conv = conversions.transpose("d/kernel:0", _var((1, 1, 3, 2)), axes=(0, 1), shape=(1, 1, 3, 2))
    conversions.bind([conv], {"d/kernel:0": (3, 2)}, lambda v: v.shape)
    port = conv.values_to_port([kernel])[0]
    assert port.shape == (1, 1, 3, 2) and np.array_equal(conv.values_to_golden([port])[0], kernel)
    flipped = conversions.transpose("d/kernel:0", _var((2, 3)))
    conversions.bind([flipped], {"d/kernel:0": (3, 2)}, lambda v: v.shape)
    assert np.array_equal(flipped.values_to_port([kernel])[0], kernel.T)


def test_a_conversion_that_does_not_fit_is_refused_before_anything_runs():
    with pytest.raises(tracekit.ReplayError, match=r"convert to shapes \[\(2, 3\)\], the port's variables have "
                                                   r"\[\(3, 2\)\]"):
        conversions.bind([conversions.transpose("d/kernel:0", _var((3, 2)))], {"d/kernel:0": (3, 2)},
                         lambda v: v.shape)
    with pytest.raises(tracekit.ReplayError, match="the golden has no rnn/lstm_cell/kernel:0"):
        conversions.bind([conversions.lstm("rnn/lstm_cell", _keras_lstm())], {"dense/kernel:0": (6, 2)},
                         lambda v: v.shape)


def test_a_conversion_named_for_a_slot_follows_its_variables_or_is_refused_saying_so():
    # BERT's hand-written Adam: output_weights/adam_m:0 is the optimizer's state of output_weights:0.
    from tracekit.replay.variables import following

    kernel = _var((2, 3))
    weights = conversions.transpose("output_weights:0", kernel)
    moment = conversions.transpose("output_weights/adam_m:0", kernel)
    owners = {"output_weights/adam_m:0": "output_weights:0", "output_weights/adam_v:0": "output_weights:0"}
    assert following([weights, moment], owners) == [weights]  # the slot follows its variable's conversion
    with pytest.raises(tracekit.ReplayError, match=r"output_weights/adam_m:0 is a slot of output_weights:0 \(its "
                                                   r"optimizer's state\).*convert output_weights:0 instead"):
        following([moment], owners)  # never "the golden has no output_weights/adam_m:0"


def test_a_conversion_given_in_a_var_map_is_carried_out_of_a_dict_or_its_rules():
    weights = conversions.transpose("output_weights:0", _var((2, 3)))
    rules = [(r"^layer_(\d+)/", r"layer/\1/"), (r"^output_weights:0$", weights), (r"^output_bias:0$", "cls.bias")]
    assert conversions.carried_conversions(rules) == ([rules[0], rules[2]], [weights])
    assert conversions.carried_conversions({"output_weights:0": weights, "b:0": "c"}) == ({"b:0": "c"}, [weights])
    with pytest.raises(tracekit.UsageError, match=r"rule '\^bias' is the conversion .* converts output_weights:0"):
        conversions.carried_conversions([(r"^bias", weights)])
    with pytest.raises(tracekit.UsageError, match=r"var_map\['b:0'\] is the conversion"):
        conversions.carried_conversions({"b:0": weights})


def test_the_gru_conversion_computes_what_the_tf1_cell_computes():
    layer = _keras_lstm()
    layer.cell.kernel, layer.cell.recurrent_kernel, layer.cell.bias = _var((I, 3 * U)), _var((U, 3 * U)), _var((3 * U,))
    conv = conversions.gru("rnn/gru_cell", layer)
    shapes = {"rnn/gru_cell/gates/kernel:0": (I + U, 2 * U), "rnn/gru_cell/gates/bias:0": (2 * U,),
              "rnn/gru_cell/candidate/kernel:0": (I + U, U), "rnn/gru_cell/candidate/bias:0": (U,)}
    conversions.bind([conv], shapes, lambda v: v.shape)
    rng = np.random.RandomState(1)
    golden_values = [rng.randn(*shape).astype("f4") for shape in shapes.values()]
    gates_k, gates_b, cand_k, cand_b = golden_values
    kernel, recurrent, bias = conv.values_to_port(golden_values)
    x, h = rng.randn(2, I), rng.randn(2, U)
    r, u = np.split(_sigmoid(np.concatenate([x, h], 1) @ gates_k + gates_b), 2, 1)  # TF1 GRUCell
    h_tf1 = u * h + (1 - u) * np.tanh(np.concatenate([x, r * h], 1) @ cand_k + cand_b)
    xz, xr, xh = np.split(x @ kernel + bias, 3, 1)  # Keras GRU, reset_after=False
    rz, rr, _ = np.split(h @ recurrent, 3, 1)
    z, r2 = _sigmoid(xz + rz), _sigmoid(xr + rr)
    h_keras = z * h + (1 - z) * np.tanh(xh + (r2 * h) @ recurrent[:, 2 * U:])
    np.testing.assert_allclose(h_keras, h_tf1, atol=1e-5)
    assert all(np.array_equal(a, b) for a, b in zip(conv.values_to_golden([kernel, recurrent, bias]), golden_values))
    layer.cell.reset_after = True
    with pytest.raises(tracekit.UsageError, match="reset_after=True.*GRU\\(..., reset_after=False\\)"):
        conversions.gru("rnn/gru_cell", layer)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_a_keras_rnn_replays_a_tf1_cell_golden(tracekit_replay, cell):
    model, step = rnn_model.make(cell)
    # The plugin compares at the default tolerance, all 20 steps, or fails with the first divergence.
    result = tracekit_replay("%s_model" % cell, step, model=model, convert=rnn_model.conversions(model, cell))
    actual = tracekit_replay.actual
    assert result.profile.name == "default" and result.steps == 20
    scope = "rnn/%s_cell" % cell
    kernel = scope + ("/kernel" if cell == "lstm" else "/gates/kernel")
    slot = "Adam_1" if cell == "lstm" else "Momentum"
    for key in ("var/%s:0" % kernel, "grad/%s:0" % kernel, "slot/%s/%s:0" % (kernel, slot)):
        assert result.tensor(*key.split("/", 1)).steps >= 20, key  # compared in the golden's names and shapes
    assert actual.meta["replay"]["converted"][kernel + ":0"].startswith("TF1 %sCell %s" % (cell.upper(), scope))


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_a_keras_rnn_is_teacher_forced_through_its_conversion(tf2, cell):
    # Forcing sets TF1's cell weights converted (the LSTM bias with the forget bias added) and
    # reads them back: a round trip through the offset is within its round-off.
    model, step = rnn_model.make(cell)
    result = tf2.check(golden("%s_model" % cell), step, model=model, convert=rnn_model.conversions(model, cell),
                       forcing="state")
    assert result.ok and result.forced["set"]["var"] >= 2, result.report()


@pytest.mark.parametrize("cell, options, conversion, expected", [
    ("lstm", {"epsilon": 1e-7}, {}, (0, "var/rnn/lstm_cell/kernel:0")),  # Keras Adam's default epsilon
    ("lstm", {"go_backwards": True}, {}, (0, "tap/last_output")),  # the sequence read backwards
    ("lstm", {}, {"forget_bias": 0.0}, (0, "tap/last_output")),  # the conversion without TF1's forget bias
    ("lstm", {"learning_rate": 1e-3}, {}, (0, "lr/learning_rate")),
    ("gru", {"momentum": 0.5}, {}, (1, "var/rnn/gru_cell/gates/kernel:0")),  # equal at step 0, not after
    ("gru", {"go_backwards": True}, {}, (0, "tap/last_output")),
])
def test_wrong_rnn_ports_are_caught_where_they_depart(tf2, cell, options, conversion, expected):
    model, step = rnn_model.make(cell, **options)
    name = "%s_model" % cell
    actual = tf2.replay(golden(name), step, model=model, steps=3, convert=rnn_model.conversions(model, cell, **conversion))
    result = tracekit.compare(golden(name), actual)
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == expected, result.report()


def test_an_lstm_port_without_tf1s_forget_bias_is_named_by_a_replay_of_its_step(tf2):
    def port():
        model, step = rnn_model.make("lstm")
        return model, step, {"convert": rnn_model.conversions(model, "lstm", forget_bias=0.0)}
    result = tf2.check(golden("lstm_model"), make_port=port, steps=3)  # each replay a fresh port
    first = result.first_divergence
    assert (first.step, first.key) == (0, "tap/last_output") and \
        [f.code for f in result.fingerprints] == ["lstm-forget-bias"], result.report()
    assert "named cause, verified by a replay: lstm-forget-bias, in TF1 LSTMCell rnn/lstm_cell -> Keras LSTM" in \
        result.report()
    # the port's own traced tf.function cannot replay again: nothing is claimed, and the result says why
    model, step, own = port()
    result = tf2.check(golden("lstm_model"), step, model=model, steps=3, **own)
    assert not result.ok and result.fingerprints == [], result.report()
    assert any("variants" in note and "make_port=" in note for note in result.notes), result.notes


@pytest.mark.parametrize("cell, hint", [
    ("lstm", 'pass convert=[tracekit.tf2.lstm("rnn/lstm_cell", <that Keras LSTM layer>)]'),
    ("gru", 'pass convert=[tracekit.tf2.gru("rnn/gru_cell", <that Keras GRU layer, built with reset_after=False>)]'),
])
def test_without_the_conversion_the_refusal_names_it(tf2, cell, hint):
    model, step = rnn_model.make(cell)
    with pytest.raises(tracekit.ReplayError) as err:
        tf2.replay(golden("%s_model" % cell), step, model=model)
    assert "only in the golden: rnn/%s_cell/" % cell in str(err.value) and hint in str(err.value)


def test_the_training_preset_still_catches_a_port_that_departs_after_step_0(tf2):
    model, step = rnn_model.make("gru", momentum=0.5)  # equal to TF1's 0.9 at step 0, not after
    actual = tf2.replay(golden("gru_model"), step, model=model, steps=5, convert=rnn_model.conversions(model, "gru"))
    result = tracekit.compare(golden("gru_model"), actual, "training")
    first = result.first_divergence
    assert not result.ok and first.step == 1 and first.kind == "var", result.report()
    assert result.profile.name == "training"
    assert result.conventions == []  # a constant learning rate: not the momentum convention
