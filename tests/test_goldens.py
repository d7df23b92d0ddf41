"""The example goldens shipped in goldens/: whole, and holding what their issue promises."""

from __future__ import annotations

import os
import sys

import pytest

import tracekit
from tracekit.store import audit_trace

from .support import FOREIGN_GOLDENS as FOREIGN
from .support import GOLDENS, build_golden, run_python
from .support.stats_oracle import same_as_oracle


SHIPPED = ["seed_example.h5", "estimator_model.h5", "slim_resnet.h5", "lstm_model.h5", "gru_model.h5", "keras_fit.h5",
           "two_optimizers.h5", "momentum_model.h5", "gan_model.h5"]


@pytest.mark.parametrize("name", SHIPPED)
def test_golden_verifies(name):
    result = tracekit.verify(os.path.join(GOLDENS, name))
    assert result.ok, result.problems
    with tracekit.open(os.path.join(GOLDENS, name)) as trace:
        assert trace.meta["tensorflow"]["version"] == "1.15.5"  # recorded on the real legacy stack
        assert trace.meta["environment"]["python"].startswith("3.7.")
        assert trace.has_initial and trace.names("grad") and trace.names("loss") and trace.names("lr")


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_golden_checked_its_loss_and_its_updates_agree(name):
    """The recorder's self-check verified each kind of step's loss, and the audit (recomputing
    every optimizer update in float64, over every whole step, or its re-execution when recorded)
    finds every variable agreeing."""
    path = os.path.join(GOLDENS, name)
    with tracekit.open(path) as trace:
        checks = trace.meta["self_check"]
        assert checks and all(c["verdict"] == "verified" for c in checks), checks
        assert len({c["train_ops"] for c in checks}) == len(trace.meta["train_ops"])  # every kind of step
        result = audit_trace(trace)
    assert result.ok, [v for v in result.variables if not v.ok]
    # every variable agrees, by its kernel's rule or, where the golden's facts leave the rule short
    # (TF1 Keras' Adam reads its betas from variables), by its update's re-execution when recorded
    assert result.variables and all(v.verdict == "agrees" for v in result.variables), result.variables


def test_a_planted_gradient_fails_the_audit(tmp_path):
    """A golden whose recorded gradient is not the one the update applied (1% off at step 2) is
    caught by `tracekit verify --audit`, naming the variable and the step."""
    source = os.path.join(GOLDENS, "momentum_model.h5")
    planted = str(tmp_path / "planted.h5")
    with tracekit.open(source) as trace:
        steps = [{key: step[key] for key in step} for step in trace]
        build_golden(planted, steps, initial={key: trace.initial[key] for key in trace.initial},
                     meta={k: v for k, v in trace.meta.items() if k not in ("catalog", "provenance")},
                     change=lambda k, key, value: value * 1.01 if (k, key) == (2, "grad/hidden/kernel:0") else value)
    proc = run_python(sys.executable, ["-m", "tracekit", "verify", "--audit", planted], check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "hidden/kernel:0" in proc.stdout and "disagrees" in proc.stdout


def test_seed_example_golden():
    with tracekit.open(os.path.join(GOLDENS, "seed_example.h5")) as trace:
        assert len(trace) == 100
        assert trace.names("tap") == ["layer1", "layer2", "logits"]
        assert trace.meta["seeds"]["mode"] == "num_random_ops"


def test_estimator_golden():
    with tracekit.open(os.path.join(GOLDENS, "estimator_model.h5")) as trace:
        assert len(trace) == 50
        assert trace.names("input") == ["IteratorGetNext:0", "IteratorGetNext:1"]
        assert len(trace.names("random")) == 1  # the dropout draw
        assert {"bn/moving_mean:0", "bn/moving_variance:0"} <= set(trace.names("var"))
        assert sum("Regularizer" in n for n in trace.names("loss")) == 2


def test_slim_golden():
    with tracekit.open(os.path.join(GOLDENS, "slim_resnet.h5")) as trace:
        assert len(trace) == 5
        assert trace.meta["user"]["zero_code"]["script"].endswith("slim_resnet.py")
        assert any(n.endswith("/Momentum:0") for n in trace.names("slot"))


@pytest.mark.parametrize("name", ["seed_example.h5", "estimator_model.h5", "slim_resnet.h5"])
def test_goldens_from_two_machines_agree_within_roundoff_and_say_why_not_bit_for_bit(name):
    """tests/data/foreign_cpu holds the goldens recorded on another machine (AVX2, no AVX-512) by
    the same scripts: the comparison picks the round-off bound and passes; compared exactly it
    fails, and the report names machine round-off as the likely cause: both goldens carry the
    fingerprints that prove the same program ran on CPUs whose kernels differ."""
    foreign, shipped = os.path.join(FOREIGN, name), os.path.join(GOLDENS, name)
    auto = tracekit.compare(foreign, shipped)
    assert auto.ok and auto.profile.name == "round-off", auto.report()
    assert auto.report().startswith("MATCH (within round-off; golden recorded on TensorFlow 1.15.5")
    exact = tracekit.compare(foreign, shipped, tracekit.Tolerance.exact())
    assert not exact.ok, "the fixture must come from a machine that computes other last bits than goldens/'s"
    cause = exact.likely_cause
    assert cause is not None and not cause.port and cause.likely, exact.report()
    assert "likely cause: the machine, not the code" in exact.report()
    assert any(change.field == "cpu instruction sets" for change in cause.changes), exact.report()
    for tolerance in (None, tracekit.Tolerance.exact(), tracekit.Tolerance()):  # fast statistics = float64 ones
        same_as_oracle(foreign, shipped, tolerance)
