"""A port's model may hold Keras trackables that are not variables (an adapted StringLookup's
vocabulary table handler sits in model.variables): they are not the golden's and are skipped,
never a raw AttributeError out of the replay."""

from __future__ import annotations

import tracekit
from tools.ports import seed_example
from tracekit.replay.variables import model_variables

from ..support import golden


def test_a_model_with_an_adapted_string_lookup_replays(tf2):
    tf = tf2.tf
    model, step = seed_example.make()
    lookup = tf.keras.layers.StringLookup()
    lookup.adapt(tf.constant(["a", "b", "b", "c"]))
    model.lookup = lookup  # tracked by the model, listed among its variables
    assert any(not hasattr(v, "assign") for v in model.variables)
    assert [v.name for v in model_variables(model)] == [
        "seed/dense/kernel:0", "seed/dense/bias:0", "seed/dense_1/kernel:0", "seed/dense_1/bias:0",
        "seed/dense_2/kernel:0", "seed/dense_2/bias:0"]
    with tf2.replay(golden("seed_example"), step, model=model, steps=3) as actual:
        result = tracekit.compare(golden("seed_example"), actual)
        assert result.ok and result.steps == 3, result.report()
