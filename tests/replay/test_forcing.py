"""Teacher forcing (forcing="state"): every step after the first starts from the golden's
variables, optimizer slots and step counter after the step before, so each step's error is
its own. A correct port then matches at the default tolerance over every step (unforced,
round-off accumulates through Adam and batch norm past it); wrong ports are still caught
where they depart."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tools.ports import estimator_model, momentum_model, seed_example, slim_resnet

from ..support import golden

DEFAULT = tracekit.Tolerance()


def _max_ulps(result, kind):
    return max(e.max_ulps for e in result.max_errors() if e.kind == kind)


def test_a_correct_port_matches_step_by_step_at_the_default_tolerance(tf2):
    model, step = estimator_model.make()
    drifted = tracekit.compare(golden("estimator_model"), tf2.replay(golden("estimator_model"), step, model=model),
                               DEFAULT)
    assert not drifted.ok and drifted.first_divergence.step > 0  # accumulated round-off, after step 0
    model, step = estimator_model.make()
    forced = tf2.replay(golden("estimator_model"), step, model=model, forcing="state")
    assert forced.meta["replay"]["forcing"] == "state"
    result = tracekit.compare(golden("estimator_model"), forced, DEFAULT)
    assert result.ok and result.steps == 50, result.report()
    assert result.forcing == "state" and "forcing: state (teacher-forced" in result.report()
    assert result.to_dict(by_step=False)["forcing"] == "state"
    # The local error is a few ulps where the accumulated one reached tens.
    assert _max_ulps(result, "tap") < 10 < _max_ulps(drifted, "tap")


def test_the_state_each_step_starts_from_is_the_goldens(tf2):
    # A step that moves nothing (zero gradients, learning rate 0): the state read after step k is
    # what forcing loaded before it, the golden's after step k - 1, with Adam's m and v decayed
    # once and the step counter one up.
    model, _ = estimator_model.make()
    optimizer = tf2.tf.keras.optimizers.Adam(0.0, epsilon=1e-8)

    def idle(inputs):
        optimizer.apply_gradients([(tf2.tf.zeros_like(v), v) for v in model.trainable_variables])
    actual = tf2.replay(golden("estimator_model"), idle, model=model, steps=4, forcing="state", random="none")
    with tracekit.open(golden("estimator_model")) as g:
        for k in (2, 3):
            before, after = g.step(k - 1), actual.step(k)
            assert np.array_equal(after["var/hidden/kernel:0"], before["var/hidden/kernel:0"])
            assert np.allclose(after["slot/hidden/kernel/Adam:0"], before["slot/hidden/kernel/Adam:0"] * 0.9)
            assert np.allclose(after["slot/hidden/kernel/Adam_1:0"], before["slot/hidden/kernel/Adam_1:0"] * 0.999)
            assert int(after["var/global_step:0"]) == int(before["var/global_step:0"]) + 1


@pytest.mark.parametrize("options, where", [
    ({"bn_momentum": 0.99}, (0, "var/bn/moving_mean:0")),
    ({"epsilon": 1e-7}, (0, "var/hidden/kernel:0")),
])
def test_wrong_ports_are_still_caught_where_they_depart(tf2, options, where):
    model, step = estimator_model.make(**options)
    actual = tf2.replay(golden("estimator_model"), step, model=model, steps=5, forcing="state")
    result = tracekit.compare(golden("estimator_model"), actual, DEFAULT)
    assert not result.ok and (result.first_divergence.step, result.first_divergence.key) == where
    assert result.tensor(*where[1].split("/", 1)).first_failed == 0


def test_a_later_local_error_is_found_at_its_step(tf2):
    # Keras SGD(momentum) departs from TF1's rule once the golden's learning rate changes: the
    # forced replay fails there too, and not before (each step from the golden's own state).
    model, step = momentum_model.make(optimizer="keras")
    actual = tf2.replay(golden("momentum_model"), step, model=model, forcing="state")
    result = tracekit.compare(golden("momentum_model"), actual, DEFAULT)
    assert not result.ok and result.first_divergence.step > 0
    early = [t.by_step[s].ok for t in result.tensors for s in t.by_step if s < result.first_divergence.step]
    assert all(early)


def test_forcing_modes_are_checked(tf2):
    model, step = estimator_model.make()
    with pytest.raises(tracekit.UsageError, match="forcing must be 'none'"):
        tf2.replay(golden("estimator_model"), step, model=model, forcing="layers")
    result = tf2.check(golden("estimator_model"), step, model=model, forcing="state", steps=3, tolerance=DEFAULT)
    assert result.ok and result.forcing == "state"


def test_tap_forcing_confines_a_wrong_layer_to_its_tap(tf2):
    # A relu TF1 did not have after layer 1: unforced, every tap after it fails too; with the
    # golden's value handed on at each tap, only layer1 fails, and the layers after it agree.
    model, step = seed_example.make(activation="relu")
    plain = tracekit.compare(golden("seed_example"), tf2.replay(golden("seed_example"), step, model=model, steps=5),
                             DEFAULT)
    assert not plain.tensor("tap", "layer2").ok and not plain.tensor("tap", "logits").ok
    model, step = seed_example.make(activation="relu")
    actual = tf2.replay(golden("seed_example"), step, model=model, steps=5, forcing="taps")
    result = tracekit.compare(golden("seed_example"), actual, DEFAULT)
    assert (result.first_divergence.step, result.first_divergence.key) == (0, "tap/layer1")
    assert result.forcing == "taps" and "forcing: taps" in result.report()
    for key in ("tap/layer2", "tap/logits", "loss/loss"):
        assert result.tensor(*key.split("/", 1)).ok, result.report()
    assert not result.tensor("grad", "dense/kernel:0").ok  # the relu's gradient is the port's own


def test_correct_ports_pass_with_tap_forcing(tf2):
    for name, make in (("estimator_model", estimator_model.make), ("seed_example", seed_example.make),
                       ("slim_resnet", slim_resnet.make)):  # slim has no taps: as forced by state
        model, step = make()
        result = tracekit.compare(golden(name), tf2.replay(golden(name), step, model=model, forcing="taps"), DEFAULT)
        assert result.ok and result.forcing == "taps", result.report()


def test_a_tap_the_golden_lacks_stops_tap_forcing_with_its_name(tf2):
    model, step = seed_example.make()

    def extra(inputs):
        tracekit.tap("not_in_golden", tf2.tf.constant([1.0]))
        return step(inputs)
    with pytest.raises(tracekit.ReplayError, match="taps 'not_in_golden' at step 0, and the golden recorded no"):
        tf2.replay(golden("seed_example"), extra, model=model, steps=1, forcing="taps")


class _Stub:
    """A runner whose state reads back as `held`; `scales`: the port's scale of converted values."""

    def __init__(self, held, not_replayed=None, scales=None):
        self.held, self.not_replayed, self.scales = held, not_replayed or {}, scales or {}

    def read_state(self, digested=()):
        return list(self.held.items())

    def port_scales(self, state):
        return dict(self.scales)


def test_forcing_reads_back_what_it_set_and_lists_what_it_could_not():
    import numpy as np

    from tracekit.errors import ReplayError
    from tracekit.replay.forcing import forced_record

    golden = type("G", (), {"path": "g.h5"})()
    state = {"var/w:0": np.float32([1.0, 2.0]), "slot/w/m:0": np.float32([0.5, 0.25]), "var/beta1_power:0": np.float32(.9),
             "var/global_step:0": np.int64(3)}
    forced = ["var/w:0", "slot/w/m:0", "var/global_step:0"]
    # a momentum slot converted by the learning rate and back reads back within ulps: set
    close = {"var/w:0": np.float32([1.0, 2.0]), "slot/w/m:0": np.float32([0.5, 0.25]) * (1 + 1e-7),
             "var/global_step:0": np.int64(3)}
    record = forced_record(golden, _Stub(close, {"var/beta1_power:0": "no Keras counterpart"}), 1, state, forced)
    assert record == {"step": 1, "set": {"var": 2, "slot": 1},
                      "not_set": {"var/beta1_power:0": "no Keras counterpart"}}
    for key, wrong in (("var/w:0", np.float32([1.0, 2.001])), ("var/global_step:0", np.int64(1)),
                       ("slot/w/m:0", np.float32([0.5]))):
        with pytest.raises(ReplayError, match=r"step 4: teacher forcing set 3 tensors .* 1 read back otherwise \(%s\)" % key):
            forced_record(golden, _Stub(dict(close, **{key: wrong})), 4, state, forced)


def test_a_value_converted_through_an_offset_reads_back_within_the_offsets_round_off():
    # TF1's LSTM bias of about 0.01 is held in Keras with the forget bias of 1.0 added: taken away
    # again, it reads back an eps of 1.0 off, 12 ulps of its own scale and well within the port's
    import numpy as np

    from tracekit.errors import ReplayError
    from tracekit.replay.forcing import forced_record

    golden = type("G", (), {"path": "g.h5"})()
    bias = np.float32([0.0123, -0.0071])
    state = {"var/rnn/lstm_cell/bias:0": bias}
    back = (bias + np.float32(1.0)) - np.float32(1.0)
    assert not np.array_equal(back, bias)
    forced = list(state)
    record = forced_record(golden, _Stub({"var/rnn/lstm_cell/bias:0": back}, scales={forced[0]: 1.0}), 1, state, forced)
    assert record["set"] == {"var": 1}
    with pytest.raises(ReplayError, match="1 read back otherwise"):
        forced_record(golden, _Stub({"var/rnn/lstm_cell/bias:0": back}), 1, state, forced)


@pytest.mark.parametrize("where", [0, -1])
def test_a_tensor_longer_than_a_chunk_reads_back_otherwise_wherever_its_one_element_differs(where):
    # compared in float64 a chunk at a time (a big model's slot is not widened whole): the last chunk counts too
    from tracekit.replay.forcing import READ_BACK_CHUNK, reads_back

    want = np.linspace(-1.0, 1.0, READ_BACK_CHUNK * 2 + 3, dtype=np.float32).reshape(-1, 1)
    got = want.copy()
    assert reads_back(got, want)
    got.reshape(-1)[where] += np.float32(0.01)
    assert not reads_back(got, want)


def test_a_fresh_slot_is_held_as_one_element_and_reads_as_the_whole():
    from tracekit.replay.slots import compact

    zeros = np.zeros((512, 256), np.float32)
    held = compact(zeros)
    assert held.shape == zeros.shape and held.dtype == zeros.dtype and np.array_equal(held, zeros)
    assert held.strides == (0, 0) and not held.flags.writeable  # one element's memory, read-only
    varied = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert compact(varied) is varied
