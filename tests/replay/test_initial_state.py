"""A golden that lacks part of the initial state a replay loads (an update by an earlier tracekit
kept only what the TF2 run had before its first step: no optimizer slots) stops the replay with a
TracekitError naming the golden, the tensor and what to do, whether the step is a tf.function or
runs eagerly; never a KeyError out of TensorFlow's tracing."""

from __future__ import annotations

import pytest

import tracekit
from tools.ports import estimator_model

from ..support import build_golden, golden


def _without(path, drop):
    """A copy of the estimator golden whose initial state lacks the keys `drop` matches."""
    with tracekit.open(golden("estimator_model")) as source:
        meta = {k: v for k, v in source.meta.items() if k != "catalog"}
        initial = {k: v for k, v in source.initial.items() if not drop(k)}
        steps = [dict(step.items()) for step in source]
        infos = [step.info for step in source]
    return build_golden(path, steps, initial, meta=meta, info=lambda k: infos[k])


@pytest.mark.parametrize("eager", [False, True])
def test_missing_initial_slots_are_a_replay_error(tf2, tmp_path, eager):
    path = _without(str(tmp_path / "no_slots.h5"), lambda key: key.startswith("slot/"))
    model, step = estimator_model.make()
    tf2.tf.config.run_functions_eagerly(eager)
    try:
        with pytest.raises(tracekit.ReplayError, match=r"no_slots\.h5: the initial state has no slot/.*:0, which a "
                                                       r"replay with init='golden' loads into the port's optimizer "
                                                       r"at its first update.*replay with init='seed'"):
            tf2.replay(path, step, model=model, steps=2)
    finally:
        tf2.tf.config.run_functions_eagerly(False)
    # init='seed' starts from the port's own values, as the message says
    model, step = estimator_model.make()
    with tf2.replay(path, step, model=model, steps=2, init="seed") as actual:
        assert len(actual) == 2


def test_a_missing_initial_variable_is_a_replay_error(tf2, tmp_path):
    path = _without(str(tmp_path / "no_kernel.h5"), lambda key: key == "var/hidden/kernel:0")
    model, step = estimator_model.make()
    with pytest.raises(tracekit.ReplayError, match=r"no_kernel\.h5: the initial state has no var/hidden/kernel:0, "
                                                   r"which a replay with init='golden' loads into the port;"):
        tf2.replay(path, step, model=model, steps=1)
