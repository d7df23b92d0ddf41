"""The judged check on the generated family of long runs (tools/family_spec.py), at the size CI
holds: the first FAMILY runs (a ReLU, tanh and GELU MLP and a max-pooling conv net; Adam,
Momentum and RMSProp; batch 8 to 32; dropout on and off) shortened to STEPS steps, recorded on
TF 1.15 at test time, once for every framework's ports (the ported_family fixture). Each correct port MATCHes; each wrong port MISMATCHes at its slip's step.
tools/family.py runs the whole family, 200 to 400 steps, under both oneDNN settings
(docs/REPLAY.md has its table)."""

from __future__ import annotations

import functools
import os

import pytest

import tracekit
from tools import family_spec as spec
from tools.ports import family

from ..support import PORTED_FAMILY as FAMILY, PORTED_STEPS as STEPS, once, record_family

RUNS = spec.family(FAMILY, STEPS)


@pytest.fixture(scope="module")
def goldens(ported_family):
    return ported_family


def test_the_family_covers_its_axes():
    runs = spec.family()
    assert len(runs) >= 24 and {r.model for r in runs} == set(spec.MODELS)
    assert {r.optimizer for r in runs} == set(spec.OPTIMIZERS) and {r.depth for r in runs} == {2, 3, 4, 5}
    assert min(r.width for r in runs) == 64 and max(r.width for r in runs) == 1024
    assert {r.batch for r in runs} == {8, 16, 32, 64} and {bool(r.dropout) for r in runs} == {True, False}
    assert {r.steps for r in runs} == {200, 300, 400} and {r.slip for r in runs} == set(spec.SLIPS)
    assert all(r.slip_at < r.steps and not (r.slip == "late" and r.optimizer == "momentum") for r in runs)
    assert spec.family() == runs  # the same family on every call and machine


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS, ids=[run.name for run in RUNS])
def test_the_correct_port_matches_and_its_slip_fails_at_its_step(tf2, goldens, run):
    golden = os.path.join(goldens, run.name + ".h5")
    result = tf2.check(golden, make_port=functools.partial(family.make_port, run))
    assert result.ok and result.judged == "local", result.report()
    wrong = tf2.check(golden, make_port=functools.partial(family.make_port, run, True))
    assert not wrong.ok and wrong.first_divergence.step == run.slip_at, wrong.report()
    assert wrong.arbitration.steps[-1].verdict == "port"


EVERY, KEYFRAMED = 10, 4  # the first KEYFRAMED runs, recorded whole after every EVERY-th step
KEYFRAMED_RUNS = RUNS[:KEYFRAMED]


@pytest.fixture(scope="module")
def keyframed_goldens(legacy_python, tmp_path_factory):
    return once(tmp_path_factory, "family-every",
                lambda out: record_family(legacy_python, out, KEYFRAMED, STEPS, EVERY))


@pytest.mark.slow
@pytest.mark.parametrize("run", KEYFRAMED_RUNS, ids=[run.name for run in KEYFRAMED_RUNS])
def test_a_golden_kept_as_digests_between_keyframes_judges_the_family_alike(tf2, keyframed_goldens, run):
    """Digests made in TF 1.15's graph between keyframes, the port's in its tf.function: the
    judged check is the drift view alone, and still passes the correct port and finds the slip,
    a whole-tensor change, at its step."""
    golden = os.path.join(keyframed_goldens, run.name + ".h5")
    with tracekit.open(golden) as trace:  # the state whole at the keyframes alone, digests between
        whole = [step.index for step in trace if any(key.startswith("var/") for key in step)]
        assert set(range(0, STEPS, EVERY)) <= set(whole) <= set(range(0, STEPS, EVERY)) | {STEPS - 1}
        assert all(step.digests for step in trace if step.index not in whole)
    result = tf2.check(golden, make_port=functools.partial(family.make_port, run))
    assert result.ok and result.judged == "envelope", result.report()
    wrong = tf2.check(golden, make_port=functools.partial(family.make_port, run, True))
    assert not wrong.ok and wrong.first_divergence.step == run.slip_at, wrong.report()
