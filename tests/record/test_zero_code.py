"""`tracekit record -o OUT -- script.py ARGS`: unmodified scripts, every way they reach the session."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tracekit
from tracekit.report.trace import show
from tracekit.store import provenance

from ..support import ROOT
from ..support.recording import record_cli


def _tensors(path):
    with tracekit.open(path) as trace:
        out = {}
        for step in [trace.initial] + list(trace):
            for key in step:
                value = step[key]
                out[(step.index, key)] = value.tobytes() if isinstance(value, np.ndarray) else repr(value)
        return out


def test_plain_loop(tmp_path):
    out = tmp_path / "plain.h5"
    proc = record_cli(out, "plain_loop.py", "--steps", 6)
    assert proc.stdout.count("loss") == 6  # the script ran as itself, with its own arguments
    with tracekit.open(str(out)) as trace:
        assert len(trace) == 6
        assert trace.names("input") == ["x:0"] and trace.names("loss") == ["loss"]
        assert len(trace.names("random")) == 1  # the dropout draw
        assert {"hidden/kernel:0", "out/kernel:0"} <= set(trace.names("grad"))
        assert "hidden/kernel/Adam:0" in trace.names("slot")
        assert trace.meta["user"]["zero_code"]["argv"][1:] == ["--steps", "6"]
        losses = [float(line.split()[-1]) for line in proc.stdout.splitlines() if "loss" in line]
        assert np.allclose([s["loss/loss"] for s in trace], losses, atol=1e-5)
        # Its provenance: a recording, with the command that made it as it was typed (the launcher
        # rewrites sys.argv for the script), where and on what.
        prov = provenance.read(trace.meta, trace.created)
        environment = trace.meta["environment"]
    assert not prov.derived and prov.stored and prov.updates == [] and prov.owners == []
    command = prov.recording.command
    assert command.split()[1:6] == ["-m", "tracekit", "record", "-o", str(out)]
    assert command.endswith("plain_loop.py --steps 6")
    assert prov.recording.cwd == ROOT and prov.recording.date[:2] == "20"
    assert prov.recording.environment == environment


def test_recording_twice_is_bit_identical(tmp_path):
    record_cli(tmp_path / "a.h5", "plain_loop.py", "--steps", 4)
    record_cli(tmp_path / "b.h5", "plain_loop.py", "--steps", 4)
    a, b = _tensors(str(tmp_path / "a.h5")), _tensors(str(tmp_path / "b.h5"))
    assert len(a) > 40 and a == b


def test_step_limit_stops_the_script(tmp_path):
    out = tmp_path / "limit.h5"
    proc = record_cli(out, "plain_loop.py", "--steps", 10, steps=3)
    assert proc.returncode == 0 and proc.stdout.count("loss") == 2  # stopped inside its third run
    with tracekit.open(str(out)) as trace:
        assert len(trace) == 3


def test_script_crash_leaves_a_golden_of_completed_steps(tmp_path):
    out = tmp_path / "crash.h5"
    proc = record_cli(out, "plain_loop.py", "--steps", 10, check=False, env={"CRASH_AT": "4"})
    assert proc.returncode != 0 and "legacy script crashed at step 4" in proc.stderr
    with tracekit.open(str(out)) as trace:
        assert trace.complete and len(trace) == 4
    assert tracekit.verify(str(out)).ok


def test_exit_code_is_the_scripts(tmp_path):
    proc = record_cli(tmp_path / "exit.h5", "plain_loop.py", "--steps", 2, "--exit", 3, check=False)
    assert proc.returncode == 3
    with tracekit.open(str(tmp_path / "exit.h5")) as trace:
        assert len(trace) == 2


def test_keras_fit_through_make_callable(tmp_path):
    out = tmp_path / "keras.h5"
    proc = record_cli(out, "keras_fit.py")
    assert "fit done" in proc.stdout
    with tracekit.open(str(out)) as trace:
        assert len(trace) == 8  # 64 samples / batch 16 * 2 epochs
        assert "dense_input:0" in trace.names("input") and trace.names("loss") == ["loss"]
        assert {"dense/kernel:0", "dense_1/bias:0"} <= set(trace.names("grad"))
        assert any(name.endswith("/m:0") for name in trace.names("slot"))
        first = trace.step(0)["input/dense_input:0"]
        assert first.shape == (16, 5)


def test_monitored_training_session(tmp_path):
    out = tmp_path / "monitored.h5"
    record_cli(out, "monitored.py")
    with tracekit.open(str(out)) as trace:
        assert len(trace) == 4
        assert [s.info["global_step"] for s in trace] == [1, 2, 3, 4]
        data = np.arange(40, dtype=np.float32).reshape(10, 4) / 40.0
        assert np.array_equal(trace.step(1)["input/IteratorGetNext:0"], data[2:4])
        assert trace.names("slot") == ["w/Momentum:0"]


def test_missing_script_is_a_usage_error(tmp_path):
    proc = record_cli(tmp_path / "x.h5", "no_such_script.py", check=False)
    assert proc.returncode == 2 and "no script at" in proc.stderr


@pytest.mark.tf1
def test_tf_slim_learning_train(tmp_path):
    out = tmp_path / "slim.h5"
    record_cli(out, os.path.join(ROOT, "tools", "goldens", "slim_resnet.py"), "--steps", 2)
    with tracekit.open(str(out)) as trace:
        assert len(trace) == 2
        assert trace.names("input") == ["IteratorGetNext:0", "IteratorGetNext:1"]
        assert any("BatchNorm/moving_mean" in n for n in trace.names("var"))
        assert any(n.endswith("/Momentum:0") for n in trace.names("slot"))
        assert len(trace.names("loss")) > 2  # the loss and slim's L2 weight decay terms


@pytest.mark.tf1
def test_the_goldens_warnings_are_printed_whole_at_the_end_and_strict_fails(tmp_path):
    # racy_gradient.py's ungated gradients race with their ref variables' updates (TF 1.15): the
    # golden warns of each race.
    out = tmp_path / "racy.h5"
    proc = record_cli(out, "racy_gradient.py", "--steps", 2)
    with tracekit.open(str(out)) as trace:
        warnings = trace.meta["warnings"]
        said = show(trace)
    assert warnings and all(isinstance(w, str) for w in warnings)
    tail = proc.stderr[proc.stderr.index("recorded %s" % out):].splitlines()
    assert tail[1] == "%s carries %d warnings (tracekit show prints them again):" % (out, len(warnings))
    assert tail[2:] == ["  WARNING " + w for w in warnings]  # whole, a line each, once
    assert all(said.count("WARNING   " + w) == 1 for w in warnings)
    strict = record_cli(tmp_path / "strict.h5", "racy_gradient.py", "--steps", 2, strict=True, check=False)
    assert strict.returncode == 3 and "WARNING a race in the training step" in strict.stderr
    assert os.path.exists(str(tmp_path / "strict.h5"))  # written all the same
    clean = record_cli(tmp_path / "clean.h5", "racy_gradient.py", "--steps", 2, "--ordered", strict=True, check=False)
    assert clean.returncode == 0 and "WARNING" not in clean.stderr.replace("WARNING:tensorflow", "")


def test_the_api_recorder_returns_and_logs_its_warnings(tmp_path, caplog):
    import logging

    import tensorflow as tf

    import tracekit.tf1

    graph = tf.Graph()
    with graph.as_default(), caplog.at_level(logging.WARNING, logger="tracekit.record"):
        x = tf.constant(np.ones((2, 3), np.float32))  # fed nothing: the golden warns it holds no input
        w = tf.compat.v1.get_variable("w", [3, 3], initializer=tf.compat.v1.ones_initializer())
        loss = tf.reduce_sum(tf.matmul(x, w) ** 2)
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tracekit.tf1.record(str(tmp_path / "api.h5"), steps=2) as recorder:
            with recorder.session(tf.compat.v1.Session(graph=graph)) as sess:
                sess.run(tf.compat.v1.global_variables_initializer())
                for _ in range(2):
                    sess.run(train)
    with tracekit.open(str(tmp_path / "api.h5")) as trace:
        assert recorder.warnings == trace.meta["warnings"]
    assert any("record no inputs" in w for w in recorder.warnings), recorder.warnings
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("tracekit.record")]
    assert logged == ["%s: %s" % (tmp_path / "api.h5", w) for w in recorder.warnings]
