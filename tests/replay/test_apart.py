"""A judged check runs each port in a forked child where that is safe (tf2/apart.py): the port's
memory goes with the child. Shown on the arbiter's kink model (test_arbiter.py), whose judged
check makes a port for the forced run, each arbitrated step (float32 and float64) and each run of
the drift envelope, in a fresh interpreter where TensorFlow has not started."""

from __future__ import annotations

import json
import textwrap

import pytest

import tracekit
from tracekit.comparison.arbiter import EXPLAINED
from tracekit.tf2.apart import APART

from ..support import run_python
from .test_arbiter import X, make

CHILD = textwrap.dedent("""
    import json, os, signal, sys
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tracekit, tracekit.tf2
    from tensorflow.python.eager import context
    from tests.replay.test_arbiter import make

    golden, pids, crash = sys.argv[1:4]

    def port():
        with open(pids, "a") as f:
            f.write("%d\\n" % os.getpid())
        if crash == "yes":
            os.kill(os.getpid(), signal.SIGSEGV)
        return make("port")

    try:
        result = tracekit.tf2.check(golden, make_port=port, judge="local")
    except tracekit.TracekitError as exc:
        print(json.dumps({"error": "%s: %s" % (type(exc).__name__, exc)}))
        sys.exit(0)
    print(json.dumps({"ok": result.ok, "notes": result.notes, "drift_notes": result.drift.notes,
                      "arbitrated": [a.verdict for a in result.arbitration.steps], "parent": os.getpid(),
                      "started_here": context.context()._context_handle is not None}))
""")


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    model, step = make("golden")
    path = str(tmp_path_factory.mktemp("apart") / "kink.h5")
    tracekit.tf2.derive(step, [{"x": X}] * 2, model=model).save(path)
    return path


def _run(golden, tmp_path, crash=False):
    pids = tmp_path / "pids"
    proc = run_python(__import__("sys").executable, ["-c", CHILD, golden, str(pids), "yes" if crash else "no"],
                      env={"TRACEKIT_APART": "1"})
    return json.loads(proc.stdout.strip().splitlines()[-1]), [int(p) for p in pids.read_text().split()]


def test_each_port_of_a_judged_check_is_made_in_a_child_and_the_verdict_is_the_same(tf2, golden, tmp_path):
    found, pids = _run(golden, tmp_path)
    assert found["ok"] and found["arbitrated"] == [EXPLAINED, EXPLAINED]  # as in this process (test_arbiter)
    # the forced run, 2 arbitrated steps (float32 and float64 each), the port's own run, 1 or 2 perturbed replays
    assert len(pids) >= 6 and found["parent"] not in pids and len(set(pids)) >= 5
    assert "memory: %s" % APART in found["notes"]
    assert not found["started_here"]  # the parent never ran TensorFlow: every fork was safe


def test_where_tensorflow_already_runs_the_ports_stay_in_this_process_and_the_result_says_so(tf2, golden):
    result = tf2.check(golden, make_port=lambda: make("port"), judge="local")  # this test process ran TF
    assert result.ok
    assert "memory: the runs of the port in this process (TensorFlow had already started here): peak memory " \
           "grows with each fresh port" in result.notes


def test_a_port_that_crashes_its_child_is_reported_with_the_signal(tf2, golden, tmp_path):
    found, pids = _run(golden, tmp_path, crash=True)
    assert found["error"].startswith("ReplayError: a run of the port died of SIGSEGV in its own process")
    assert "TRACEKIT_APART=0" in found["error"] and len(pids) == 1
