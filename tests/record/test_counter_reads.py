"""Which racy reads of the step counter a recorder keeps (record/counter_reads.py), on graphs
built here: a read that passes the counter on is fetched; one through an addition, inside a
cond, or beside an ordered read of the same counter is not, and a warning says why. What a
step keeps is checked against the counter before and after the step."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tracekit.record import counter_reads
from tracekit.record.walk import unordered_reads


def _races(tf, rate, counter, increment):
    from tracekit.record.walk import executed_ops
    executed = executed_ops([rate.op, increment], frozenset())
    return unordered_reads([rate], counter, executed, frozenset())


def _graph(tf, make_rate):
    v1 = tf.compat.v1
    counter = v1.train.get_or_create_global_step()
    rate = make_rate(counter)
    increment = counter.assign_add(1).op
    return rate, counter, increment


def _plan(races, counter):
    """What a recorder's step plan holds of them (graph.StepPlan)."""
    return SimpleNamespace(races=races, global_step=counter)


def _kept(tf, make_rate):
    rate, counter, increment = _graph(tf, make_rate)
    races = _races(tf, rate, counter, increment)
    warnings = []
    return races, counter_reads.fetches(tf.compat.v1.get_default_graph(), _plan(races, counter), False,
                                        warnings.append), warnings


def _ref(counter):
    """TF 1.15's global step is a ref variable, read where an op past its identity takes it;
    TF 2's graph mode makes a resource variable, read by its ReadVariableOp."""
    return counter.op.type in ("VariableV2", "Variable")


def test_a_cast_of_the_counter_is_fetched(tf, graph):
    races, fetched, warnings = _kept(tf, lambda c: 0.1 * 0.5 ** tf.cast(c, tf.float32))
    assert len(races) == 1 and len(fetched) == 1 and warnings == []
    read, = fetched.values()
    assert read.op.name == races[0]["read"] and read.op.type in ("Cast", "ReadVariableOp")


def test_a_keras_callable_step_keeps_no_read(tf, graph):
    rate, counter, increment = _graph(tf, lambda c: 0.1 * 0.5 ** tf.cast(c, tf.float32))
    warnings = []
    plan = _plan(_races(tf, rate, counter, increment), counter)
    assert counter_reads.fetches(tf.compat.v1.get_default_graph(), plan, True, warnings.append) == {}
    assert "in a Keras training step" in warnings[0]


def test_two_racy_reads_of_one_rate_are_both_fetched(tf, graph):
    races, fetched, warnings = _kept(tf, lambda c: tf.cast(c, tf.float32) * tf.cast(tf.cast(c, tf.int32), tf.float32))
    assert len(races[0]["reads"]) == 2 and races[0]["ordered"] == []
    assert len(fetched) == 2 and warnings == []


def test_an_addition_is_not_a_read_that_passes_the_counter_on(tf, graph):
    races, fetched, warnings = _kept(tf, lambda c: tf.cast(c + 0, tf.float32))
    if _ref(tf.compat.v1.train.get_global_step()):  # the addition takes the value: not the counter's own
        assert fetched == {} and "does not pass the counter's value on" in warnings[0]
    else:  # the ReadVariableOp takes it, before the addition
        assert [t.op.type for t in fetched.values()] == ["ReadVariableOp"] and warnings == []


def test_a_read_ordered_beside_a_racy_one_keeps_nothing(tf, graph):
    def rate(counter):
        ordered = tf.cast(counter, tf.float32)
        with tf.control_dependencies([ordered]):  # the racy one; the ordered one runs before the increment
            return ordered + tf.cast(tf.cast(counter, tf.int32), tf.float32)

    counter = tf.compat.v1.train.get_or_create_global_step()
    value = rate(counter)
    first = value.op.inputs[0].op  # the ordered cast
    with tf.control_dependencies([first]):
        increment = counter.assign_add(1).op
    races = _races(tf, value, counter, increment)
    warnings = []
    fetched = counter_reads.fetches(tf.compat.v1.get_default_graph(), _plan(races, counter), False, warnings.append)
    assert races and races[0]["ordered"] and fetched == {}
    assert "ordered against its increment" in warnings[0]


def test_a_read_inside_a_cond_keeps_nothing(tf, graph):
    def rate(counter):
        return tf.cond(tf.constant(True), lambda: tf.cast(counter, tf.float32) * 0.1, lambda: tf.constant(0.1))
    races, fetched, warnings = _kept(tf, rate)
    # TF 1.15: the read is in the cond's context; TF 2's graph mode: it is in the branch's own graph
    assert fetched == {} and (races == [] or warnings), (races, warnings)


@pytest.mark.parametrize("seen, expected", [
    ([[4.0]], {"global_step:0": 0}),
    ([[5.0]], {"global_step:0": 1}),
    ([[5.0, 5.0]], {"global_step:0": 1}),
    ([[4.0, 5.0]], {}),  # two reads on both sides of the increment
    ([[4.5]], {}),  # neither: a cast that rounded
])
def test_a_step_keeps_what_its_reads_saw_only_where_it_is_the_counter_before_or_after(seen, expected):
    races = [{"lr": "lr/rate", "counter": "global_step:0", "read": "Cast", "increment": "AssignAdd"}]
    reads = {"lr/rate": [np.float32(v) for v in seen[0]]}
    warnings = []
    assert counter_reads.offsets(races, reads, 4, 5, warnings.append) == expected
    assert bool(warnings) == (expected == {})
