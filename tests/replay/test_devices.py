"""Replay on other devices and numerics: the switches that change numerics (op determinism,
TensorFloat-32, Grappler) recorded in the actual's environment; a port under Keras mixed
precision compared with its float32 golden by a profile that says so."""

from __future__ import annotations

import pytest

import tracekit
from tools.ports import estimator_model, seed_example

from ..support import golden


def test_numerics_switches_are_recorded_and_put_back(tf2):
    from tracekit.tf2.settings import _determinism_enabled

    tf = tf2.tf
    before = (_determinism_enabled(), tf.config.experimental.tensor_float_32_execution_enabled(),
              tf.config.optimizer.get_experimental_options())
    model, step = seed_example.make()
    with tf2.replay(golden("seed_example"), step, model=model, steps=2, determinism=True, tf32=False,
                    grappler=False) as switched:
        env = switched.meta["tensorflow"]
        assert env["determinism"] is True and env["tf32"] is False
        assert env["grappler"]["arithmetic_optimization"] is False
        model, step = seed_example.make()
        with tf2.replay(golden("seed_example"), step, model=model, steps=2) as plain:
            diff = tracekit.compare(plain, switched).environment_diff
    fields = {change.field: (change.golden, change.actual) for change in diff.changes}
    assert fields["op determinism"] == (False, True)
    assert fields["Grappler options"][0] == "default" and "arithmetic_optimization=off" in fields["Grappler options"][1]
    after = (_determinism_enabled(), tf.config.experimental.tensor_float_32_execution_enabled(),
             tf.config.optimizer.get_experimental_options())
    assert after == before


def test_a_bad_grappler_setting_is_a_usage_error(tf2):
    model, step = seed_example.make()
    with pytest.raises(tracekit.UsageError, match="grappler must be False"):
        tf2.replay(golden("seed_example"), step, model=model, steps=1, grappler="off")


@pytest.fixture
def mixed_float16(tf2):
    keras = tf2.tf.keras
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize("keep_float32", [False, True], ids=["float16 compute", "float32 compute kept"])
def test_a_mixed_precision_port_passes_its_float32_golden(tf2, mixed_float16, keep_float32):
    model, step = estimator_model.make_mixed_precision(keep_float32=keep_float32)
    with tf2.replay(golden("estimator_model"), step, model=model) as actual:
        assert actual.meta["tensorflow"]["dtype_policy"] == "mixed_float16"
        result = tracekit.compare(golden("estimator_model"), actual)
        if not keep_float32:  # float16 really ran: the default tolerance would fail it
            assert not tracekit.compare(golden("estimator_model"), actual, "default").ok
    assert result.profile.name == "mixed-precision", result.profile
    assert result.ok, result.report()


def test_a_wrong_mixed_precision_port_is_still_caught(tf2, mixed_float16):
    model, step = estimator_model.make_mixed_precision(bn_momentum=0.99)
    with tf2.replay(golden("estimator_model"), step, model=model, steps=3) as actual:
        result = tracekit.compare(golden("estimator_model"), actual)
    assert result.profile.name == "mixed-precision"
    assert (result.first_divergence.step, result.first_divergence.key) == (0, "var/bn/moving_mean:0")
