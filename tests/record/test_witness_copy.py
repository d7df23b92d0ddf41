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
