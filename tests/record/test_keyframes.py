"""The keyframe plan of a recording under a size budget (record/keyframes.py): what it chooses
stays within the budget, and it prefers keeping every kind whole at the closest spacing."""

import pytest
from hypothesis import given, settings, strategies as st

from tracekit.errors import RecordError, UsageError
from tracekit.record import keyframes
from tracekit.record.keyframes import (FULL_KINDS, Keyframes, Schedule, StepSizes, estimate, parse_size, plan,
                                       plan_online, room)


@pytest.mark.parametrize("text, size", [("500MB", 500 * 10 ** 6), ("1.5GiB", int(1.5 * 2 ** 30)), ("2e9", 2 * 10 ** 9),
                                        (1024, 1024), (" 3 kb ", 3000)])
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "5 parsecs", "-1MB", 0, "0GB"])
def test_bad_sizes_say_what_a_size_looks_like(text):
    with pytest.raises(UsageError, match="500MB|positive"):
        parse_size(text)


def test_where_a_recording_keeps_what():
    frames = Keyframes(every=10, steps=30)
    assert [s for s in range(30) if frames.keyframe(s)] == [0, 10, 20, 29]
    assert frames.how("grad/w", False) == "digest" and frames.how("loss/loss", False) == "whole"
    assert frames.how("tap/h", True) == "whole"
    assert Keyframes(every=10, steps=30, digests=False).how("var/w", False) is None
    assert [s for s in range(5) if Keyframes(every=None, steps=5).keyframe(s)] == []
    assert not Keyframes(every=1, steps=None).how("var/w", True) == "digest"


kinds = st.fixed_dictionaries({k: st.integers(0, 10 ** 8) for k in sorted(FULL_KINDS)})


@settings(max_examples=300, deadline=None)
@given(st.integers(10 ** 5, 10 ** 11), st.integers(1, 300), st.integers(0, 10 ** 9), st.integers(0, 10 ** 6), kinds,
       st.integers(1, 2000))
def test_a_plan_fits_its_budget_or_says_why_not(budget, steps, initial, light, whole, values):
    digest = {k: min(v, 4 * 1000 + keyframes.BYTES_PER_DIGEST) for k, v in whole.items()}
    sizes = StepSizes(light, whole, digest, values)
    target = int(budget * keyframes.TARGET)
    try:
        chosen = plan(budget, steps, initial, sizes)
    except RecordError as exc:
        assert "budget" in str(exc)
        assert estimate(steps, initial, sizes, None, frozenset()) > target  # not even digests fit
        return
    assert chosen.budget["estimate"] == estimate(steps, initial, sizes, chosen.every, chosen.whole) <= target
    if chosen.whole == FULL_KINDS and chosen.every is not None and chosen.every > 1:
        assert estimate(steps, initial, sizes, chosen.every - 1, FULL_KINDS) > target  # the closest that fits
    if chosen.whole != FULL_KINDS:  # kinds given up only where no spacing up to the preferred one fits whole
        assert all(estimate(steps, initial, sizes, every, FULL_KINDS) > target
                   for every in range(1, min(steps, keyframes.PREFERRED_EVERY) + 1))


def test_a_tight_budget_gives_up_fetches_then_taps_then_gradients():
    # Taps of 100 MB a step, gradients 10 MB, the state 30 MB.
    sizes = StepSizes(1000, {"fetch": 0, "tap": 10 ** 8, "grad": 10 ** 7, "var": 10 ** 7, "slot": 2 * 10 ** 7},
                      {"fetch": 0, "tap": 10 ** 4, "grad": 10 ** 4, "var": 10 ** 4, "slot": 2 * 10 ** 4}, 50)
    roomy = plan(10 ** 11, 100, 10 ** 7, sizes)
    assert (roomy.every, roomy.whole) == (1, FULL_KINDS)
    tight = plan(6 * 10 ** 8, 100, 10 ** 7, sizes)  # room for 11 keyframes without the taps
    assert tight.every <= keyframes.PREFERRED_EVERY and tight.whole == frozenset({"grad", "var", "slot"})
    tighter = plan(10 ** 8, 100, 10 ** 7, sizes)
    assert tighter.whole == frozenset({"var", "slot"}) and tighter.every > keyframes.PREFERRED_EVERY
    least = plan(2 * 10 ** 7, 100, 10 ** 7, sizes)  # the initial state and digests
    assert least.every is None
    with pytest.raises(RecordError, match="larger --budget"):
        plan(10 ** 7, 100, 10 ** 7, sizes)


def test_room_says_when_a_keyframe_would_overrun():
    sizes = StepSizes(0, {"var": 100}, {"var": 10}, 1)
    planned = plan(10 ** 6, 10, 0, sizes)
    assert room(planned, 0, 0, sizes)
    assert not room(planned, 5, 10 ** 6, sizes)  # already at the budget: digests from here


@settings(max_examples=300, deadline=None)
@given(st.integers(10 ** 5, 10 ** 10), st.integers(0, 10 ** 9), st.integers(0, 10 ** 6), kinds, st.integers(1, 2000),
       st.integers(1, 3000), st.lists(st.floats(0.8, 1.15), min_size=1, max_size=50))
def test_an_online_plan_stays_under_its_budget_wherever_the_run_ends(budget, initial, light, whole, values, steps,
                                                                      ratios):
    # A budget without a step count: every step is either a keyframe, digests, or (the budget full)
    # the end of the recording; what was written stays under the budget after every step, though
    # each step stores up to 15% more than estimated.
    digest = {k: min(v, 4 * 1000 + keyframes.BYTES_PER_DIGEST) for k, v in whole.items()}
    sizes = StepSizes(light, whole, digest, values)
    target = budget * keyframes.TARGET
    schedule = Schedule(1, None, True, budget)
    try:
        schedule.frames = plan_online(budget, initial, sizes)
    except RecordError as exc:
        assert "larger --budget" in str(exc) and initial + sizes.between() > target
        return
    schedule.sizes = sizes
    written, kept = initial, []
    for step in range(steps):
        if schedule.exhausted(step, written):
            assert written + sizes.between() > target and schedule.frames.ended == step
            assert schedule.warnings() and "held %d steps" % step in schedule.warnings()[0]
            break
        keyframe = schedule.keyframe(step, written)
        kept += [step] if keyframe else []
        written += (sizes.step(schedule.frames.whole) if keyframe else sizes.between()) * ratios[step % len(ratios)]
        assert written <= budget, (step, written, budget)
    gaps = [b - a for a, b in zip(kept, kept[1:])]
    assert gaps == sorted(gaps)  # keyframes only thin out
    if schedule.frames.every is not None and written + sizes.step(schedule.frames.whole) * 4 <= target // 2:
        assert kept and kept[0] == 0


def test_an_online_plan_thins_its_keyframes_as_the_run_grows():
    # Room for the initial state and about 40 keyframes of 1 MB: every step whole at first, then
    # every 2nd, 4th, ... so that the budget always holds the run doubling its length.
    sizes = StepSizes(1000, {"var": 10 ** 6}, {"var": 10 ** 4}, 10)
    budget = int((10 ** 6 + 40 * 10 ** 6) / keyframes.TARGET)
    schedule = Schedule(1, None, True, budget)
    schedule.frames, schedule.sizes = plan_online(budget, 10 ** 6, sizes), sizes
    written, kept = 10 ** 6, []
    for step in range(400):
        assert not schedule.exhausted(step, written)
        if schedule.keyframe(step, written):
            kept.append(step)
            written += sizes.step(schedule.frames.whole)
        else:
            written += sizes.between()
    assert kept[:4] == [0, 1, 2, 3] and schedule.frames.thinned and 10 < len(kept) < 40
    assert schedule.frames.meta()["online"] and schedule.frames.meta()["thinned"] == schedule.frames.thinned


def test_a_budget_refuses_only_what_it_cannot_choose():
    with pytest.raises(UsageError, match="neither every=K nor digests=False"):
        Schedule(10, None, True, 10 ** 9)
    Schedule(1, None, True, 10 ** 9)  # no step count: planned online
