"""tracekit.tf2.check: replay and compare as the steps run. Its result is the one of
compare(golden, replay(...)), tensor by tensor and step by step, with nothing written
unless asked; fail_fast stops at the first divergence."""

from __future__ import annotations

import os
import tempfile

import pytest

import tracekit
from tools.ports import estimator_model, seed_example

from ..support import golden
from .test_ports import TRAINING, WRONG

CASES = {
    "seed_example, correct": ("seed_example", seed_example.make, {}, {}),
    "estimator_model, correct": ("estimator_model", estimator_model.make, {}, {}),
}
CASES.update({"%s, %s" % (v[0], k): v[:4] for k, v in WRONG.items()
              if k in ("regularization loss left out", "relu where TF1 had none",
                       "Keras Adam epsilon 1e-7 (TF1: 1e-8)")})  # deterministic: not TF2's own random draws


def fields(stats):
    return repr([getattr(stats, name) for name in stats.__slots__])


def summary(result):
    """Everything a comparison found, as comparable text (NaN statistics included)."""
    first = result.first_divergence
    return {
        "ok": result.ok, "steps": (result.steps, result.golden_steps, result.actual_steps),
        "first": None if first is None else (first.step, first.key, fields(first.stats)),
        "tensors": [(t.key, t.failed_steps, t.accepted_steps, t.driven_by_noise,
                     {k: fields(s) for k, s in t.by_step.items()}, sorted(t.noise))
                    for t in result.tensors],
        "missing": result.missing, "not_compared": sorted(result.not_compared.items()),
        "short": result.short, "conventions": [h.code for h in result.conventions],
        "profile": result.profile.name, "changes": result.environment_diff.changes,
    }


@pytest.mark.parametrize("case", list(CASES))
def test_check_finds_what_compare_of_the_replay_finds(tf2, case, tmp_path, monkeypatch):
    name, make, options, replay_options = CASES[case]
    scratch = tmp_path / "scratch"  # this test's own temporary directory: other processes write in /tmp
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    for tolerance in (TRAINING, None):
        model, step = make(**options)
        actual = tf2.replay(golden(name), step, model=model, steps=4, **replay_options)
        expected = tracekit.compare(golden(name), actual, tolerance)
        model, step = make(**options)
        before = set(os.listdir(str(scratch)))
        checked = tf2.check(golden(name), step, model=model, steps=4, tolerance=tolerance, **replay_options)
        assert set(os.listdir(str(scratch))) == before  # nothing written
        assert summary(checked) == summary(expected)
        assert "(not written)" in checked.actual and checked.actual in checked.report()
        assert checked.ok == expected.ok == case.endswith("correct")
    # out= writes the actual trace as well, and names it in the result
    model, step = make(**options)
    out = str(tmp_path / "actual.h5")
    written = tf2.check(golden(name), step, model=model, steps=4, tolerance=TRAINING, out=out, **replay_options)
    assert written.actual == out and summary(written) == summary(tracekit.compare(golden(name), out, TRAINING))


def test_fail_fast_stops_at_the_first_divergence(tf2):
    # The learning rate is one step off from step 0 on: a port of 10 steps stops after the first.
    model, step = seed_example.make(lr_shift=1)
    steps = []
    result = tf2.check(golden("seed_example"), step, model=model, tolerance=TRAINING, fail_fast=True,
                       progress=lambda done, total: steps.append(done))
    # compared on a thread at most two steps behind the port, and judged once the next step is fed
    # (its reads overlap the judging): it stops a few steps after step 0
    assert not result.ok and result.first_divergence.step == 0 and steps == list(range(1, len(steps) + 1))
    assert len(steps) <= 5 < result.golden_steps
    assert result.short is None and result.actual_steps == result.steps == len(steps)
    assert "fail_fast: stopped after step %d, at the first divergence (step 0)" % (len(steps) - 1) in result.report()
    # without fail_fast every step runs
    model, step = seed_example.make(lr_shift=1)
    full = tf2.check(golden("seed_example"), step, model=model, tolerance=TRAINING)
    assert full.actual_steps == full.golden_steps > 1 and full.first_divergence.step == 0
    # a correct port is not stopped
    model, step = seed_example.make()
    passed = tf2.check(golden("seed_example"), step, model=model, tolerance=TRAINING, fail_fast=True)
    assert passed.ok and passed.steps == passed.golden_steps and not passed.notes


def test_check_refuses_what_replay_does_not_take(tf2):
    model, step = seed_example.make()
    with pytest.raises(tracekit.UsageError, match=r"cannot pass on option.s. stesp.*steps"):
        tf2.check(golden("seed_example"), step, model=model, stesp=3)
    with pytest.raises(tracekit.UsageError, match="fail_fast must be True or False"):
        tf2.check(golden("seed_example"), step, model=model, fail_fast="yes")
