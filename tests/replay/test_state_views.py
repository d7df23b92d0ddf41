"""The state a replay reads after each step is a view of TensorFlow's buffers, not a copy
(capture.VariableReader): a view taken before the next step must still hold what it read once
the step has updated the variables in place, by assignment or by an optimizer's kernels."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("update", ["assign", "assign_sub", "keras_adam", "keras_sgd_momentum"])
def test_a_state_read_keeps_its_values_when_the_variables_change_after(tf2, update):
    import tensorflow as tf

    from tracekit.tf2.capture import VariableReader

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


def test_a_captured_value_is_kept_without_a_copy_and_survives_the_steps_after(tf2):
    """A py op's argument is TensorFlow's own buffer: kept as a read-only view, it must still hold
    its step's value after later steps whose ops could reuse that buffer in place."""
    import tensorflow as tf

    from tracekit.tf2.capture import retained, when_run

    weights = tf.Variable(np.linspace(-1, 1, 4096, dtype=np.float32), name="weights")
    got, held = [], []

    @tf.function
    def step(scale):
        grad = tf.sin(weights * scale) + 1.0
        when_run([grad], lambda values: got.append(retained(values[0])), held)
        weights.assign_add((grad * 2.0) * 1e-2)  # grad's last use: its buffer may be forwarded

    expected = []
    for k in range(4):
        expected.append((np.sin(weights.numpy() * np.float32(k + 1)) + 1.0).astype(np.float32))
        step(tf.constant(float(k + 1)))
    assert len(got) == 4
    for value, wanted in zip(got, expected):
        assert not value.flags.writeable and not value.flags.owndata  # a view, not a copy
        np.testing.assert_allclose(value, wanted, rtol=1e-5, atol=1e-6)
    assert retained(np.ones(3)).flags.owndata  # an array of its own is copied


def test_the_first_digests_a_replay_makes_are_held_against_numpys(tf2, monkeypatch, caplog):
    """The port's state digested in TensorFlow is checked at its first read: agreeing, the reads
    between keyframes are digests; disagreeing (forced here), every read after is of values,
    with the reason logged, and no digest is made again."""
    import tensorflow as tf

    from tracekit.tf2 import capture
    from tracekit.store.digest import Digest

    rng = np.random.default_rng(5)
    big = tf.Variable(rng.standard_normal(40000).astype(np.float32), name="big")
    small = tf.Variable(rng.standard_normal(20000).astype(np.float32), name="small")
    tiny = tf.Variable(np.ones(8, np.float32), name="tiny")

    reader = capture.VariableReader()
    read = reader.read([big, small, tiny], [big, small, tiny])
    assert isinstance(read(big), Digest) and isinstance(read(small), Digest)
    assert isinstance(read(tiny), np.ndarray)  # too small to digest in TensorFlow
    assert reader._checked and reader.unusable is None

    forged = capture.VariableReader()
    held = []
    monkeypatch.setattr(capture, "disagreement", lambda made, value: held.append(made.count) or "forged")
    with caplog.at_level("WARNING"):
        read = forged.read([big, small, tiny], [big, small, tiny])
    assert held == [20000]  # the smallest digest made is the one checked
    assert "small:0: forged" in forged.unusable and "forged" in caplog.text
    for variable in (big, small, tiny):
        assert np.array_equal(read(variable), variable.numpy())
    again = forged.read([big, small], [big, small])
    assert all(isinstance(again(v), np.ndarray) for v in (big, small)) and held == [20000]


def test_a_steps_gradients_are_digested_in_its_function_where_the_golden_keeps_digests(tf2, monkeypatch, caplog):
    """Captured in a tf.function, a big gradient is sent as its digest made there at the steps the
    golden keeps only its digest, once a step that sent both found them to agree; a small one, a
    key of the capture's own ("#...") and the steps the golden keeps values are sent as values.
    Where the check fails (forced here), values are sent from then on, with the reason logged."""
    import tensorflow as tf

    from tracekit.digest_ops import disagreement
    from tracekit.tf2 import graph_digests
    from tracekit.tf2.capture import Capture
    from tracekit.store.digest import Digest

    rng = np.random.default_rng(11)
    weights = tf.Variable(rng.standard_normal(30000).astype(np.float32), name="weights")
    bias = tf.Variable(np.ones(8, np.float32), name="bias")
    big, small, own = "grad/weights:0", "grad/bias:0", "grad/#taken:weights:0"

    def traced(capture):
        @tf.function
        def step(scale):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.sin(weights * scale)) + tf.reduce_sum(bias * scale)
            grads = tape.gradient(loss, [weights, bias])
            capture.put_many([(big, grads[0]), (small, grads[1]), (own, grads[0])])
            return grads[0]
        return step

    capture = Capture()
    step = traced(capture)
    seen = []
    for k, digested in enumerate([(), (big, small, own), (big, small, own), (small,), (big,)]):
        capture.reset()
        capture.live = True
        capture.plan(digested)
        expected = step(tf.constant(1.0 + k)).numpy()
        capture.live = False
        seen.append({key: value for key, value in capture.values.items()})
        assert np.array_equal(capture.values[own], expected) and capture.values[small].shape == (8,)
    kinds = [type(values[big]).__name__ for values in seen]
    assert kinds == ["ndarray", "ndarray", "Digest", "ndarray", "Digest"]  # the second: both sent, checked
    assert capture.digests.checked and capture.digests.unusable is None
    for k in (2, 4):  # the digests made in the function are numpy's of the value, within the round-off they state
        made = seen[k][big]
        assert isinstance(made, Digest) and made.roundoff > 0
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.sin(weights * (1.0 + k)))
        assert disagreement(made, tape.gradient(loss, weights).numpy()) is None

    forged = Capture()
    step = traced(forged)
    monkeypatch.setattr(graph_digests, "disagreement", lambda made, value: "forged")
    with caplog.at_level("WARNING"):
        for k in range(3):
            forged.reset()
            forged.live = True
            forged.plan((big,))
            expected = step(tf.constant(1.0 + k)).numpy()
            forged.live = False
            assert isinstance(forged.values[big], np.ndarray) and np.array_equal(forged.values[big], expected)
    assert forged.digests.unusable == "grad/weights:0: forged" and "forged" in caplog.text


def test_a_captured_digest_is_numpys_on_adversarial_values_and_each_shape_is_traced_once(tf2):
    """The digest a step's function makes of a captured tensor (graph_digests.sending: one
    function per shape and dtype, called from the step) is numpy's within the round-off it
    states on the values that take the careful branch (NaN, Inf, squares beyond float32, all
    NaN) and those that do not, in float16, float32 and float64; a second tensor of a shape
    already seen adds one call to the step, not the digest's ops again."""
    import tensorflow as tf

    from tests.record.test_graph_digests import _cases, _check
    from tracekit.tf2.capture import Capture
    from tracekit.store.digest import Digest

    cases = {"grad/" + name: value for name, value in _cases().items()}
    held = {key: tf.Variable(value) for key, value in cases.items()}
    twin = tf.Variable(cases["grad/normal"] * 2, name="twin")
    capture = Capture()

    @tf.function(autograph=False)
    def step():
        capture.put_many([(key, tf.identity(variable)) for key, variable in held.items()])
        capture.put_many([("grad/twin", tf.identity(twin))])

    for digested in ((), list(cases) + ["grad/twin"], list(cases) + ["grad/twin"]):  # values, both, digests
        capture.reset()
        capture.live = True
        capture.plan(digested)
        step()
        capture.live = False
    assert capture.digests.checked and capture.digests.unusable is None
    for key, value in cases.items():
        sent = capture.values[key]
        assert isinstance(sent, Digest), key

        class Made:  # what _check asks of the ops: the digest they made
            def digest(self, stats, sample):
                return sent
        _check(Made(), None, None, value)
    ops = step.get_concrete_function().graph.get_operations()
    calls = [op for op in ops if op.type in ("PartitionedCall", "StatefulPartitionedCall")]
    assert len(calls) == len(cases) + 1  # each captured tensor: one call, no digest op in the step itself
    assert len([op for op in ops if op.type in ("If", "StatelessIf")]) == 2  # each side op's, run at full steps
    assert not [op for op in ops if op.type == "EuclideanNorm"]
    # one function per shape and dtype: the twin calls the normal one's, as do the other (N,) float32s
    assert len({op.get_attr("f").name for op in calls}) == len({(v.shape, v.dtype) for v in cases.values()}) < 10
