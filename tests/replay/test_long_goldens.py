"""A long golden recorded for real (TF 1.15): a ReLU MLP trained 60 steps with Adam, a learning
rate schedule and a weight decay from step 20 (tools/goldens/long_models.py, smaller than the
evidence's 784-128-128-128-10 over 200 steps: tools/long_goldens.py). Its correct port passes by
default, judged by its local errors, the float64 arbiter and the drift envelope; slips that only
appear late fail at their step."""

from __future__ import annotations

import functools
import os

import pytest

from tools.ports import long_models

from ..support import ROOT, golden, run_python
from .test_ports import WRONG

STEPS, NUDGE_AT = 60, 45
SIZE = dict(features=64, hidden=64)


@pytest.fixture(scope="module")
def mlp(legacy_python, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("long") / "mlp.h5")
    run_python(legacy_python, [os.path.join(ROOT, "tools", "goldens", "long_models.py"), path, "--model", "mlp",
                               "--steps", str(STEPS), "--features", "64", "--hidden", "64"], cwd=ROOT)
    return path


@pytest.mark.slow
def test_the_correct_port_passes_by_default(tf2, mlp):
    result = tf2.check(mlp, make_port=functools.partial(long_models.make_mlp, **SIZE))
    assert result.judged == "local" and result.ok, result.report()
    assert result.drift is not None and result.drift.ok and result.drift.steps == STEPS
    assert all(a.explained for a in result.arbitration.steps)  # a discontinuity met on this CPU, if any, explained


@pytest.mark.slow
@pytest.mark.parametrize("slip, step, key", [("nudge", NUDGE_AT, "var/dense_0/kernel:0"),
                                             ("decay", 20, "loss/loss")])
def test_a_slip_that_appears_late_fails_at_its_step(tf2, mlp, slip, step, key):
    port = functools.partial(long_models.make_mlp, slip, nudge_at=NUDGE_AT, **SIZE)
    result = tf2.check(mlp, make_port=port)
    assert not result.ok and (result.first_divergence.step, result.first_divergence.key) == (step, key)
    assert result.arbitration.steps[-1].step == step and result.arbitration.steps[-1].verdict == "port"
    assert "decided by: the local view" in result.report()


@pytest.mark.slow
@pytest.mark.parametrize("case", list(WRONG))
def test_every_wrong_port_still_fails_where_it_departs_when_judged(tf2, case):
    # The shipped goldens of these ports are 50 and 100 steps long: judged locally by default.
    name, make, options, replay_options, expected = WRONG[case]
    result = tf2.check(golden(name), make_port=functools.partial(make, **options), steps=3, **replay_options)
    d = result.first_divergence
    assert result.judged == "local" and not result.ok and (d.step, d.kind, d.name) == expected, result.report()
    assert result.arbitration.steps[-1].verdict in ("port", "undecided") and result.drift is None
