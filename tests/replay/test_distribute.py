"""Replay under tf.distribute: one golden, 1, 2 or 4 replicas (MirroredStrategy on logical
CPUs, MultiWorkerMirroredStrategy over two local processes), the same verdict; the
distribution slips of a wrong port caught at step 0 with a hint."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import tracekit
from tools.ports import SLIPS, distributed_step, estimator_model, seed_example
from tracekit.comparison import distribution as slips
from tracekit.errors import UsageError

from ..support import ROOT, golden

TRAINING = tracekit.Tolerance.training()
PORTS = {"seed_example": seed_example.make_distributed, "estimator_model": estimator_model.make_distributed}


@pytest.fixture(scope="module")
def tf(tf2):
    return tf2.tf


def _replay(tf2, name, replicas, steps=None, **options):
    strategy = tf2.mirrored(replicas)
    model, step = PORTS[name](strategy, **options)
    return tf2.replay(golden(name), step, model=model, strategy=strategy, steps=steps)


@pytest.mark.parametrize("name", ["seed_example", "estimator_model"])
def test_one_and_two_replicas_give_the_same_verdict(tf2, name):
    # The estimator's dropout masks reach each replica sliced to its rows; its batch norm is
    # synchronized, as TF1 normalized the whole batch.
    results = {}
    for replicas in (1, 2):
        with _replay(tf2, name, replicas) as actual:
            results[replicas] = tracekit.compare(golden(name), actual, TRAINING)
            assert results[replicas].ok, results[replicas].report()
            where = actual.meta["replay"]["distribution"]
            assert (where["strategy"], where["replicas"], len(where["devices"])) == ("MirroredStrategy", replicas,
                                                                                      replicas)
    two = results[2]
    assert two.steps == results[1].steps == len(tracekit.open(golden(name)))
    assert "replicas: 2 (MirroredStrategy on CPU:0, CPU:1; all-reduce: " in two.report()
    kinds = {e.kind for e in two.max_errors()}
    assert {"loss", "lr", "grad", "var", "tap"} <= kinds
    if name == "estimator_model":
        assert {"random", "slot"} <= kinds


def test_four_replicas_with_empty_ones_agree(tf2):
    # The seed example's batch has 2 rows: two of four replicas get none.
    with _replay(tf2, "seed_example", 4, steps=10) as actual:
        result = tracekit.compare(golden("seed_example"), actual, TRAINING)
        assert result.ok, result.report()


@pytest.mark.parametrize("kind", ["default", "one device"])
def test_the_default_and_one_device_strategies_replay_as_without_one(tf, tf2, kind):
    strategy = tf.distribute.get_strategy() if kind == "default" else tf.distribute.OneDeviceStrategy("/cpu:0")
    model, step = estimator_model.make_distributed(strategy)  # dropout: the tape runs in or out of a replica
    with tf2.replay(golden("estimator_model"), step, model=model, strategy=strategy, steps=3) as actual:
        result = tracekit.compare(golden("estimator_model"), actual, TRAINING)
        assert result.ok, result.report()
        assert actual.meta["replay"]["distribution"]["replicas"] == 1
        assert "random" in {e.kind for e in result.max_errors()}


def test_a_wrong_port_diverges_at_the_same_place_on_one_and_two_replicas(tf2):
    firsts = []
    for replicas in (1, 2):
        with _replay(tf2, "estimator_model", replicas, steps=2, epsilon=1e-7) as actual:
            first = tracekit.compare(golden("estimator_model"), actual, TRAINING).first_divergence
            firsts.append((first.step, first.key))
    assert firsts[0] == firsts[1] == (0, "var/hidden/kernel:0")


def test_per_replica_taps_are_kept_beside_the_joined_ones(tf2):
    with _replay(tf2, "estimator_model", 2, steps=1) as actual:
        step = actual.step(0)
        parts = [step["tap/bn@replica%d" % r] for r in (0, 1)]
        assert [p.shape[0] for p in parts] == [8, 8]  # 16 rows, split in two contiguous halves
        np.testing.assert_array_equal(np.concatenate(parts), step["tap/bn"])
        assert step["loss/loss"].shape == ()


SLIP_CASES = {
    "loss averaged per replica": ({"slip": "loss averaged per replica"}, (0, "loss/loss"), slips.LOSS_PER_REPLICA),
    "regularization not scaled": ({"slip": "regularization not scaled"}, (0, "loss/loss"),
                                  slips.REGULARIZATION_UNSCALED),
    "gradients all-reduced twice": ({"slip": "gradients all-reduced twice"}, (0, "grad/hidden/kernel:0"),
                                    slips.REDUCED_TWICE),
    "gradients not all-reduced": ({"slip": "gradients not all-reduced"}, (0, "grad/hidden/kernel:0"),
                                  slips.NOT_REDUCED),
    "batch norm per replica": ({"synchronized": False}, (0, "tap/bn"), slips.BATCH_NORM),
}


@pytest.mark.parametrize("case", list(SLIP_CASES))
def test_a_distribution_slip_is_caught_at_step_0_with_a_hint(tf2, case):
    options, where, code = SLIP_CASES[case]
    with _replay(tf2, "estimator_model", 2, steps=2, **options) as actual:
        result = tracekit.compare(golden("estimator_model"), actual, TRAINING)
    assert (result.first_divergence.step, result.first_divergence.key) == where, result.report()
    assert [hint.code for hint in result.distribution_hints] == [code]
    hints = [line for line in result.report().splitlines() if line.startswith("hint (distribution)")]
    assert len(hints) == 1
    if code == slips.NOT_REDUCED:  # the replicas' copies of the mirrored variables went apart
        assert not result.tensor("var", "hidden/kernel:0@replica1").ok


def test_every_slip_of_the_step_helper_is_tested():
    assert set(SLIPS) <= set(SLIP_CASES)


def test_the_same_slips_on_one_replica_are_no_slips(tf2):
    # With one replica the per-replica batch is the global one: each "slip" computes the same.
    for slip in ("loss averaged per replica", "regularization not scaled"):
        with _replay(tf2, "estimator_model", 1, steps=2, slip=slip) as actual:
            result = tracekit.compare(golden("estimator_model"), actual, TRAINING)
            assert result.ok, result.report()


# ---- partial batches, both input APIs -----------------------------------------------------------

def _tiny(tf, strategy=None):
    import contextlib

    class Tiny(tf.keras.Model):
        def __init__(self):
            super().__init__(name="tiny")
            self.hidden = tf.keras.layers.Dense(6, activation="relu", name="hidden")
            self.drop = tf.keras.layers.Dropout(0.5)
            self.out = tf.keras.layers.Dense(3, name="out")

        def call(self, x, training=False):
            hidden = tracekit.tap("hidden", self.hidden(x))
            return tracekit.tap("logits", self.out(self.drop(hidden, training=training)))

    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        model = Tiny()
        model(tf.zeros((1, 4)))
        optimizer = tf.keras.optimizers.SGD(0.1, momentum=0.9)
    return model, optimizer


@pytest.fixture(scope="module")
def partial_golden(tf, tf2, tmp_path_factory):
    """A derived golden of batches of 8, 8, 5 and 1 rows (a partial last batch, and one that
    leaves a replica empty), with dropout, recorded on one device."""
    rng = np.random.RandomState(0)
    data = [{"x": rng.randn(n, 4).astype(np.float32), "y": rng.randint(0, 3, n).astype(np.int32)}
            for n in (8, 8, 5, 1)]
    model, optimizer = _tiny(tf)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = loss_fn(inputs["y"], model(inputs["x"], training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}

    path = str(tmp_path_factory.mktemp("partial") / "partial.h5")
    tf2.derive(step, data, model=model, out=path).close()
    return path


@pytest.mark.parametrize("input_api", ["dataset", "function"])
def test_partial_last_batches_split_as_the_input_api_splits_them(tf, tf2, partial_golden, input_api):
    strategy = tf2.mirrored(2)
    model, optimizer = _tiny(tf, strategy)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    step = distributed_step(strategy, model, optimizer, loss_fn, None, x="x", y="y")
    with tf2.replay(partial_golden, step, model=model, strategy=strategy, input_api=input_api,
                    global_batch_size=8) as actual:
        result = tracekit.compare(partial_golden, actual, TRAINING)
        assert result.ok, result.report()
        masks = [t for t in result.tensors if t.kind == "random"]
        assert [t.steps for t in masks] == [4]  # every step's dropout mask, joined from the replicas' rows
        rows = [[actual.step(i)["tap/hidden@replica%d" % r].shape[0] for r in (0, 1)] for i in range(4)]
    # experimental_distribute_dataset splits each batch evenly; from a function each replica
    # takes global_batch_size / 2 rows while they last.
    assert rows == ([[4, 4], [4, 4], [3, 2], [1, 0]] if input_api == "dataset" else [[4, 4], [4, 4], [4, 1], [1, 0]])


def test_global_batch_size_must_split_for_the_function_api(tf, tf2, partial_golden):
    strategy = tf2.mirrored(2)
    model, _ = _tiny(tf, strategy)
    with pytest.raises(UsageError, match="do not split over 2 replicas"):
        tf2.replay(partial_golden, lambda inputs: None, model=model, strategy=strategy, input_api="function",
                   global_batch_size=7)
    with pytest.raises(UsageError, match="input_api must be 'dataset'"):
        tf2.replay(partial_golden, lambda inputs: None, model=model, strategy=strategy, input_api="rows")


def test_logical_devices_asked_for_too_late_say_so(tf2):
    from .conftest import REPLICA_DEVICES

    assert len(tf2.logical_cpus(2)) == 2  # already there: fine
    with pytest.raises(UsageError, match="too late.*before any TensorFlow op"):
        tf2.logical_cpus(REPLICA_DEVICES + 1)


def test_a_step_returning_per_replica_values_is_told_to_reduce_them(tf, tf2):
    strategy = tf2.mirrored(2)
    model, _ = seed_example.make_distributed(strategy)

    def step(inputs):
        return {"loss": strategy.run(lambda x: tf.reduce_sum(x), args=(inputs["x:0"],))}
    with pytest.raises(UsageError, match="per-replica values for 'loss'.*strategy.reduce"):
        tf2.replay(golden("seed_example"), step, model=model, strategy=strategy, steps=1)


# ---- MultiWorkerMirroredStrategy: two worker processes on localhost -----------------------------

def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@pytest.mark.parametrize("name, input_api, steps", [("estimator_model", "dataset", 5), ("seed_example", "function", 20)])
def test_two_worker_processes_replay_as_one_device_does(tmp_path, name, input_api, steps):
    # Plain subprocesses, one per worker, each with its TF_CONFIG: the workers are real
    # processes talking gRPC, as in production (tf's multi-process runner is a test-only API).
    ports = ",".join(str(p) for p in _free_ports(2))
    out = str(tmp_path / "actual.h5")
    child = os.path.join(ROOT, "tests", "replay", "multiworker_child.py")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    workers = [subprocess.Popen([sys.executable, child, str(i), ports, name, golden(name), out, str(steps), input_api],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for i in range(2)]
    try:
        logs = [w.communicate(timeout=240)[0] for w in workers]
    finally:
        for w in workers:
            w.kill()
    assert [w.returncode for w in workers] == [0, 0], "\n".join(log[-3000:] for log in logs)
    for index in range(2):
        result = tracekit.compare(golden(name), "%s.%d" % (out, index), TRAINING)
        assert result.ok, result.report()
        where = result.distribution
        assert (where["replicas"], where["workers"], where["worker"]) == (2, 2, index)
        # Each worker holds half of the global batch: its taps and draws are kept per replica.
        assert "per replica only (other workers" in result.not_compared.get("tap/logits", "")
        assert {"loss", "grad", "var"} <= {e.kind for e in result.max_errors()}
