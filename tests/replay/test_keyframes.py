"""Goldens that keep the whole state only at keyframes, digests between (recorded for real on TF
1.15: tools/goldens/long_models.py): a port made wrong between keyframes is caught at its step,
from the digests; a size budget keeps a golden ten times smaller than its full recording."""

from __future__ import annotations

import functools
import os

import pytest

import tracekit
from tools.ports import long_models
from tracekit.comparison.fingerprints import DECAY_ADDED, EPSILON
from tracekit.keys import split_key
from tracekit.report.trace import keyframe_lines

from ..support import ROOT, run_python

STEPS, EVERY, SLIP_AT = 30, 10, 23
SIZE = dict(features=64, hidden=64, decay_from=20)  # the learning rate decays from step 20
# Wide tanh layers: the state outweighs inputs and digests (a 1,000-element sample is a quarter of
# a 64 x 64 kernel), and a plain replay of the port stays close (no ReLU kink to cross).
WIDE = dict(features=8, hidden=512, layers=2, activation="tanh")


def _record(legacy_python, path, size=SIZE, *options):
    run_python(legacy_python, [os.path.join(ROOT, "tools", "goldens", "long_models.py"), path, "--model", "mlp",
                               "--steps", str(STEPS)] + ["--%s=%s" % (k.replace("_", "-"), v) for k, v in size.items()]
               + list(options),
               cwd=ROOT)
    return path


@pytest.fixture(scope="module")
def keyframed(legacy_python, tmp_path_factory):
    return _record(legacy_python, str(tmp_path_factory.mktemp("keyframes") / "mlp.h5"), SIZE, "--every", str(EVERY))


@pytest.fixture(scope="module")
def budgeted(legacy_python, tmp_path_factory):
    """A wide MLP recorded whole (about 100 MB), and again under a tenth of that."""
    folder = tmp_path_factory.mktemp("budget")
    full = _record(legacy_python, str(folder / "full.h5"), WIDE, "--batch=32")
    budget = os.path.getsize(full) // 10
    os.remove(full)
    return _record(legacy_python, str(folder / "budget.h5"), WIDE, "--batch=32", "--budget", str(budget)), budget


def test_the_recording_keeps_keyframes_and_digests_between(keyframed):
    with tracekit.open(keyframed) as golden:
        whole = [step.index for step in golden if not step.digests]
        assert whole == [0, 10, 20, STEPS - 1]  # every K steps, and the last
        between = golden.step(SLIP_AT)
        assert sorted({key.split("/")[0] for key in between}) == ["fetch", "input", "loss", "lr"]
        assert {key.split("/")[0] for key in between.digests} == {"tap", "grad", "var", "slot"}
        assert golden.meta["recording"]["keyframes"]["every"] == EVERY
    assert tracekit.verify(keyframed).ok


def test_the_correct_port_passes_judged_from_digests(tf2, keyframed):
    # Judged by the envelope: the port from its own state, restarted from the golden's after each
    # keyframe, digest against digest between them.
    result = tf2.check(keyframed, make_port=functools.partial(long_models.make_mlp, **SIZE))
    assert result.ok and result.judged == "envelope", result.report()
    grads = result.tensor("grad", "dense_0/kernel:0")
    # the port's own run and the perturbed one compared at steps 0-9, 10, 20 and the last: 4 of them
    # kept whole by the golden (0, 10, 20, 29), the others digests
    assert grads.steps == 13 and grads.digest_steps == 13 - 4
    assert any("restarted from the golden's state at steps 1, 11, 21 (the steps after the golden's keyframes)"
               in note for note in result.notes), result.notes
    assert any("every tensor compared at steps 0-9, every 10th step after and the last (as digests where the "
               "golden keeps them)" in note for note in result.notes), result.notes
    assert "judged: by the envelope" in result.report()
    with pytest.raises(tracekit.UsageError, match="keyframes"):
        tf2.check(keyframed, make_port=functools.partial(long_models.make_mlp, **SIZE), judge="local")


@pytest.mark.parametrize("slip, step, key, hint", [
    ("decay", 20, "loss/loss", None),
    ("late", 21, "lr/learning_rate", "the learning-rate schedule is one step behind")])
def test_a_slip_that_recurs_is_caught_at_its_step_by_the_envelope(tf2, keyframed, slip, step, key, hint):
    # The weight decay left out from step 20: each step's loss lacks its term, outside any spread.
    # The learning rate's decay started a step late (from 21, not 20): the rate differs from step 21.
    result = tf2.check(keyframed, make_port=functools.partial(long_models.make_mlp, slip, **SIZE))
    assert result.judged == "envelope" and not result.ok
    assert (result.first_divergence.step, result.first_divergence.key) == (step, key), result.report()
    assert hint is None or hint in result.report()


def test_a_layer_scaled_between_keyframes_is_caught_at_its_step_by_its_norm(tf2, keyframed):
    # Element by element the envelope is wide (Adam's noise-floor updates); the kernel scaled by
    # 1 + 1e-3 moves its norm ~8,400 eps of itself, where round-off moves it far less.
    port = functools.partial(long_models.make_mlp, "scale", nudge_at=SLIP_AT, **SIZE)
    result = tf2.check(keyframed, make_port=port)
    first = result.first_divergence
    assert result.judged == "envelope" and (first.step, first.key) == (SLIP_AT, "var/dense_1/kernel:0"), \
        result.report()
    assert first.stats.basis == "digest" and "the drift envelope allows" in first.stats.problem


def test_a_port_made_wrong_between_keyframes_is_caught_at_its_step(tf2, keyframed, tmp_path):
    # A weight moved once by 1e-3 is within what Adam makes of round-off over steps (the envelope
    # holds it); judged plain, from the digests, it is seen at its step.
    port = functools.partial(long_models.make_mlp, "nudge", nudge_at=SLIP_AT, **SIZE)
    result = tf2.check(keyframed, make_port=port, judge="plain")
    first = result.first_divergence
    assert (first.step, first.key, first.stats.basis) == (SLIP_AT, "var/dense_0/kernel:0", "digest")
    assert "step 23 (digest)" in result.report()
    # A written replay keeps digests where the golden does, and a comparison of the files agrees.
    model, step = port()
    replayed = tf2.replay(keyframed, step, model=model, out=str(tmp_path / "actual.h5"))
    kept = set(replayed.step(SLIP_AT).digests)
    with tracekit.open(keyframed) as golden:  # TF1's beta powers have no Keras counterpart: not replayed
        assert kept == set(golden.step(SLIP_AT).digests) - {"slot/beta1_power:0", "slot/beta2_power:0"}
    assert not any(key.startswith(("var/", "grad/")) for key in replayed.step(SLIP_AT))
    again = tracekit.compare(keyframed, replayed)
    assert (again.first_divergence.step, again.first_divergence.key) == (SLIP_AT, "var/dense_0/kernel:0")


def test_a_budget_keeps_the_golden_under_it(budgeted):
    path, budget = budgeted
    assert os.path.getsize(path) <= budget
    with tracekit.open(path) as golden:
        plan = golden.meta["recording"]["keyframes"]
        assert plan["budget"]["bytes"] == budget and plan["budget"]["estimate"] <= budget
        assert len(golden) == STEPS and all(step.digests for step in golden if step.index not in plan["skipped"]
                                            and (plan["every"] is None or step.index % plan["every"]))
    assert tracekit.verify(path).ok


def test_a_budget_golden_still_locates_a_wrong_port(tf2, budgeted):
    path, _ = budgeted
    right = functools.partial(long_models.make_mlp, **WIDE)
    result = tf2.check(path, make_port=right)
    assert result.ok, result.report()
    wrong = functools.partial(long_models.make_mlp, "nudge", nudge_at=SLIP_AT, **WIDE)
    first = tf2.check(path, make_port=wrong, judge="plain").first_divergence
    assert (first.step, first.key) == (SLIP_AT, "var/dense_0/kernel:0")


def test_a_replay_digests_big_gradients_and_state_in_the_ports_function(tf2, budgeted, tmp_path):
    # Between keyframes the 512 x 512 kernel's gradient, the kernel and its slots leave TensorFlow
    # as digests made in the port's functions: they state the round-off of their float32 sums
    # (a digest made in numpy states none); the first step with any sends values too, to check them.
    path, _ = budgeted
    model, step = long_models.make_mlp(**WIDE)
    replayed = tf2.replay(path, step, model=model, out=str(tmp_path / "replayed.h5"))
    made = {}
    for index in range(len(replayed)):
        for key, kept in replayed.step(index).digests.items():
            made.setdefault(key, []).append(kept.roundoff > 0)
    # The state from its first digest on; the gradients from the third step: the first traces the
    # step function (nothing is known of its gradients before), the second sends them whole too,
    # held against numpy's digests.
    assert len(made["var/dense_1/kernel:0"]) > 3 and all(made["var/dense_1/kernel:0"])
    assert made["grad/dense_1/kernel:0"][:2] == [False, False] and all(made["grad/dense_1/kernel:0"][2:])
    assert not any(made.get("grad/dense_1/bias:0", []))  # 512 elements: digested in numpy
    again = tracekit.compare(path, replayed)
    assert again.ok, again.report()


@pytest.fixture(scope="module")
def digests_only(legacy_python, tmp_path_factory):
    """The wide MLP under a budget that holds no keyframe: digests from step 0 on (as a model far
    larger than its budget is recorded)."""
    return _record(legacy_python, str(tmp_path_factory.mktemp("digests") / "mlp.h5"), WIDE, "--batch=32",
                   "--budget", "5MB")


@pytest.mark.parametrize("slip, code", [("epsilon", EPSILON), ("adamw", DECAY_ADDED)])
def test_a_keras_default_at_step_0_of_a_budget_golden_is_named_from_the_samples(tf2, digests_only, slip, code):
    # Keras Adam's epsilon (1e-7 against TF1's 1e-8), Keras AdamW's decay (0.004, TF1's Adam has none):
    # step 0 starts from the golden's whole initial state, and its digests' samples line up with it.
    path, key = digests_only, "var/dense_0/kernel:0"
    with tracekit.open(path) as golden:
        assert not any(split_key(k)[0] == "var" for step in golden for k in step)  # no keyframe
        assert not golden.step(0).digests[key].whole
    result = tf2.check(path, make_port=functools.partial(long_models.make_mlp, slip, **WIDE))
    first = result.first_divergence
    assert (first.step, first.key, first.stats.basis) == (0, key, "digest"), result.report()
    assert any("no perturbed replay was made" in note for note in result.notes)  # step 0 decided it alone
    named = [f for f in result.fingerprints if f.code == code]
    assert named and key in named[0].keys and named[0].detail["sampled"] >= 1, result.report()
    assert "fitted on the elements a digest samples" in result.report()


@pytest.fixture(scope="module")
def unknown_length(legacy_python, tmp_path_factory, budgeted):
    """The wide MLP under budgets, its recorder not told how many steps the run has: the
    budget the fixed plan had (keyframes thin out as the run goes), and a fortieth of the full
    recording (the budget fills before the run ends)."""
    _, budget = budgeted
    folder = tmp_path_factory.mktemp("unknown_length")
    return [(_record(legacy_python, str(folder / ("%d.h5" % size)), WIDE, "--batch=32", "--budget", str(size),
                     "--unknown-length"), size) for size in (budget, budget // 4)]


def test_a_budget_without_a_step_count_keeps_the_golden_under_it_wherever_the_run_ends(unknown_length):
    (roomy, budget), (tight, small) = unknown_length
    for path, size in unknown_length:
        assert os.path.getsize(path) <= size
        assert tracekit.verify(path).ok
    with tracekit.open(roomy) as golden:
        plan = golden.meta["recording"]["keyframes"]
        assert plan["online"] and plan["ended"] is None and len(golden) == STEPS
        assert plan["thinned"] and plan["thinned"] == sorted(plan["thinned"])
        whole = [step.index for step in golden if "var/dense_0/kernel:0" in step]
        assert whole and whole[0] == 0
        assert "the spacing doubled at steps %s" % ", ".join(map(str, plan["thinned"])) in keyframe_lines(golden)[0]
    with tracekit.open(tight) as golden:
        plan = golden.meta["recording"]["keyframes"]
        assert 0 < len(golden) == plan["ended"] < STEPS  # the budget full: the rest of the run unrecorded
        assert any("held %d steps" % len(golden) in w for w in golden.meta["warnings"])
        assert keyframe_lines(golden)[-1].endswith("full at step %d, where the recording ended" % len(golden))


def test_a_golden_at_a_url_is_checked_by_ranges(tf2, keyframed, tmp_path, monkeypatch):
    """tracekit.tf2.check on a golden served over HTTP (range requests), a port wrong between keyframes."""
    import shutil

    from tracekit.store import remote

    from ..support.remote import RangedServer

    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(keyframed, str(site / "mlp.h5"))
    with RangedServer(str(site)) as server:
        url = server.url("mlp.h5")
        assert tf2.check(url, make_port=functools.partial(long_models.make_mlp, **SIZE)).ok
        port = functools.partial(long_models.make_mlp, "nudge", nudge_at=SLIP_AT, **SIZE)
        first = tf2.check(url, make_port=port, judge="plain").first_divergence
        assert (first.step, first.key) == (SLIP_AT, "var/dense_0/kernel:0")
        with pytest.raises(tracekit.UsageError, match="URL"):
            model, step = port()
            tf2.replay(url, step, model=model, out=url + ".actual")
    assert remote.fetched.bytes > 0
