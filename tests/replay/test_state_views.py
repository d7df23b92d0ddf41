"""The state a replay reads after each step is a view of TensorFlow's buffers, not a copy
(capture.VariableReader): a view taken before the next step must still hold what it read once
the step has updated the variables in place, by assignment or by an optimizer's kernels."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("update", ["assign", "assign_sub", "keras_adam", "keras_sgd_momentum"])
def test_a_state_read_keeps_its_values_when_the_variables_change_after(tf2, update):
    import tensorflow as tf

    from tracekit.replay.capture import VariableReader

    kernel = tf.Variable(np.arange(12, dtype=np.float32).reshape(3, 4), name="kernel")
    optimizer = {"keras_adam": lambda: tf.keras.optimizers.Adam(0.1),
                 "keras_sgd_momentum": lambda: tf.keras.optimizers.SGD(0.1, momentum=0.9)}.get(update, lambda: None)()

    @tf.function
    def step():
        if update == "assign":
            kernel.assign(kernel * 2.0 + 1.0)
        elif update == "assign_sub":
            kernel.assign_sub(tf.ones_like(kernel))
        else:
            optimizer.apply_gradients([(tf.ones_like(kernel), kernel)])

    reader = VariableReader()
    step()  # the optimizer builds its slots
    variables = [kernel] + (list(optimizer.variables) if optimizer is not None else [])
    read = reader.read(variables)
    before = {id(v): read(v) for v in variables}
    expected = {key: value.copy() for key, value in before.items()}
    assert not before[id(kernel)].flags.writeable
    step()
    after = reader.read(variables)
    assert not np.array_equal(after(kernel), expected[id(kernel)])  # the step did change it
    for key, value in before.items():
        assert np.array_equal(value, expected[key]), key
