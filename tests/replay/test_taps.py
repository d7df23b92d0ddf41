"""tracekit.taps.capturing: the public way for a TF2 runner to take eager and tf.function taps."""

from __future__ import annotations

import tracekit
from tracekit import taps


def test_capturing_hands_taps_to_the_sink_and_restores_the_previous_one(tf2):
    tf = tf2.tf
    seen = []
    x = tf.constant([1.0, 2.0])
    assert tracekit.tap("free", x) is x  # nobody capturing: the tensor passes through
    with taps.capturing(lambda name, t: seen.append(("outer", name)) or t):
        tracekit.tap("a", x)
        with taps.capturing(lambda name, t: seen.append(("inner", name)) or t * 2):
            doubled = tracekit.tap("b", x)
        tracekit.tap("c", x)
    assert seen == [("outer", "a"), ("inner", "b"), ("outer", "c")]
    assert doubled.numpy().tolist() == [2.0, 4.0]  # what the sink returns replaces the tensor
    assert tracekit.tap("after", x) is x
