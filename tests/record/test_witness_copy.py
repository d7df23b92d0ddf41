"""How long the recorder keeps its copy of the program's graph (record/witness.py): a second
model's state in memory, needed by the self-check, the update audit and the recomputation of
racy reads of the model. A learning rate that reads the step counter unordered with its
increment (BERT's optimizer does) is kept as read with each step and needs no copy: the copy
goes once the audit is done. A racy read of the model (a loss that reads a weight unordered
with its update) keeps it to the end."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tracekit.record import selfcheck
from tracekit.record.witness import AUDIT_STEPS

STEPS = AUDIT_STEPS + 3


def _record(tf, path, racy_loss: bool, monkeypatch):
    """Records STEPS steps of a small regression whose rate reads the counter racily; returns
    how many steps were recorded when each graph copy was closed."""
    closed, recorder = [], []
    close = selfcheck.GraphCopy.close

    def spied(self):
        closed.append(recorder[0].steps)
        close(self)

    monkeypatch.setattr(selfcheck.GraphCopy, "close", spied)
    v1 = tf.compat.v1
    with tracekit.tf1.record(path) as rec:
        recorder.append(rec)
        x = v1.placeholder(tf.float32, [8, 3], name="x")
        y = v1.placeholder(tf.float32, [8, 1], name="y")
        w = v1.get_variable("w", [3, 1], initializer=v1.constant_initializer(0.1))
        counter = v1.train.get_or_create_global_step()
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        if racy_loss:  # a read of w the gradients do not need, unordered with its update: recomputed
            loss += 0.01 * tf.stop_gradient(tf.reduce_sum(w))
        loss = tf.identity(loss, name="loss")
        rate = tf.identity(0.1 * 0.9 ** tf.cast(counter, tf.float32), name="rate")
        update = v1.train.GradientDescentOptimizer(rate).minimize(loss)
        train = tf.group(update, counter.assign_add(1))  # the increment unordered with the rate's read
        with v1.Session() as sess:
            rec.session(sess)
            sess.run(v1.global_variables_initializer())
            rng = np.random.RandomState(0)
            for _ in range(STEPS):
                sess.run(train, {x: rng.randn(8, 3), y: rng.randn(8, 1)})
    return closed


@pytest.mark.parametrize("racy_loss", [False, True], ids=["racy-rate", "racy-loss"])
def test_the_graph_copy_goes_once_the_audit_is_done_where_only_a_rate_races(tf, graph, tmp_path, monkeypatch,
                                                                            racy_loss):
    path = str(tmp_path / "racy.h5")
    closed = _record(tf, path, racy_loss, monkeypatch)
    with tracekit.open(path) as trace:
        assert len(trace) == STEPS
        races = [race for race in trace.meta.get("races") or [] if "tensor" in race]
        audit = trace.meta["audit"]
        assert audit["variables"] and all(v["verdict"] == "agrees" for v in audit["variables"]), audit
    if racy_loss:  # the racy read is recomputed at every step: the copy is kept until the recording closes
        assert [race["tensor"] for race in races] == ["loss/loss"] and closed == [STEPS], (closed, races)
        with tracekit.open(path) as trace:
            assert trace.meta["recomputed"] == {"loss/loss": STEPS}
    else:  # only the rate races: closed as the last audited step is recorded, before the next runs
        assert races == [] and closed == [AUDIT_STEPS - 1], closed


def test_a_copy_is_loaded_and_read_a_piece_of_the_state_at_a_time(tf, graph, monkeypatch):
    # Each run feeds or reads at most LOAD_BYTES of the state (TensorFlow copies what it is fed); a
    # variable the state does not hold starts as the program starts it, and a load again sets the
    # state again. A read value that `kept` replaces is let go.
    v1 = tf.compat.v1
    sizes = {"a": [300], "b": [20, 30], "c": [7]}
    made = {name: v1.get_variable(name, shape, initializer=v1.zeros_initializer()) for name, shape in sizes.items()}
    counter = v1.get_variable("counter", [], initializer=v1.constant_initializer(5.0))  # not in the state
    rng = np.random.RandomState(0)
    state = {made[name].name: rng.randn(*shape).astype(np.float32) for name, shape in sizes.items()}
    copy = selfcheck.GraphCopy.of(tf, graph)
    runs = []
    run = copy.session.run
    monkeypatch.setattr(copy.session, "run", lambda fetches, *a, **k: runs.append(len(fetches)) or run(fetches, *a, **k))
    monkeypatch.setattr(selfcheck, "LOAD_BYTES", 1000)
    for scale in (1.0, 2.0):
        runs.clear()
        copy.load({name: value * scale for name, value in state.items()}, {})
        assert len(runs) == 3  # a: 1200 bytes, then b: 2400, then c with what is left
        got = copy.rerun([], sorted(state) + [counter.name])
        for name in sorted(state):
            np.testing.assert_array_equal(got[name], state[name] * scale, err_msg=name)
        assert got[counter.name] == 5.0
    held = {made["b"].name: state[made["b"].name] * 2.0}
    runs.clear()
    read = copy.rerun([], sorted(state), lambda name, value: held.get(name, value))
    assert runs == [0, 1, 1, 1]  # the ops (none), then a, b and c each in a run of its own
    assert read[made["b"].name] is held[made["b"].name]
    for name in sorted(state):
        np.testing.assert_array_equal(read[name], state[name] * 2.0, err_msg=name)
    copy.close()
