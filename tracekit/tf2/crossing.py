"""Drift outside the drift envelope (tf2/verdict.py): the first step outside, and whether a
discontinuity sent the port's own run away there, which leaves the drift unjudged until the run
next restarts from the golden's state (arbiter.crossed decides a step)."""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import AbstractSet, Callable, List, Sequence

from ..comparison.accepted import accept, failing_steps
from ..comparison.arbiter import PORT, Arbitrated
from ..comparison.calibration import CALIBRATED_KINDS
from ..comparison.engine import compare_data as compare
from ..comparison.result import Comparison
from ..comparison.tolerance import Tolerance
from ..replay.loop import Whole
from ..store import Trace
from .arbiter import crossed
from .port_runs import PortRuns

CROSSING_LOOKBACK = 2  # steps before the first outside the envelope where the port's own crossing is sought
# A kink between the trajectories explains drift outside the envelope only where the error jumped
# there by this factor over the step before: drift that grew out of it smoothly is the port's.
CROSSING_JUMP = 16.0
CROSSING_JUMPS = 2  # the latest steps where the error jumped so, searched beside the lookback's


def outside(golden: Trace, own: Trace, drift: Comparison, tolerance: Tolerance, explained: AbstractSet[int],
            port: PortRuns, restarts: "frozenset[int]", folder: str, captured: Callable[[int], bool], band: int,
            digested: bool = False) -> bool:
    """Drift outside the envelope at a step the runs `captured`: the port's own run again, in full
    over the `band` steps up to it (the same run: a replay is deterministic), finds the first step
    outside; then whether a discontinuity sent the run away there (_own_crossing). A golden kept
    as keyframes (`digested`) is searched by _digested_outside. A learning rate, an input or a
    draw (compared exactly) is no trajectory's: no crossing is sought for it. Whether a crossing
    explained the drift."""
    assert drift.first_divergence is not None
    if drift.first_divergence.kind not in CALIBRATED_KINDS:
        return False
    if digested:
        return _digested_outside(golden, drift, tolerance, explained, port, restarts, folder)
    outside = drift.first_divergence.step
    lookback = range(outside, max(outside - CROSSING_LOOKBACK, 0) - 1, -1)
    if all(captured(step) for step in range(max(outside - CROSSING_LOOKBACK - 1, 0), outside)):
        return _own_crossing(golden, own, drift, drift, port, restarts, lookback)
    window = port.replay(None, os.path.join(folder, "window.h5"), restarts,
                         lambda index: index >= outside - band, outside + 1)
    with window:
        near = compare(golden, window, tolerance, result_type=type(drift))
        accept(near, explained)
        first = near.first_divergence
        steps: Sequence[int] = lookback
        if first is not None and first.step < outside:
            drift.notes.append("first outside the envelope at step %d (%s), found by the port's own run again in "
                               "full over steps %d-%d" % (first.step, first.key, outside - band, outside))
            drift.first_divergence = first
            steps = range(first.step, max(first.step - CROSSING_LOOKBACK, 0) - 1, -1)
        return _own_crossing(golden, window, drift, near, port, restarts, steps)


def _digested_outside(golden: Trace, drift: Comparison, tolerance: Tolerance, explained: AbstractSet[int],
                      port: PortRuns, restarts: "frozenset[int]", folder: str) -> bool:
    """Drift outside the envelope at a sample of a golden kept as keyframes: the port's own run
    again, compared at every step since it last restarted from the golden's state (digest
    against digest), finds the first step outside and the steps where its error jumped; the run
    once more, kept whole (Whole: not digested) at each step searched and the one before it,
    is what the crossing search reads (a digest holds no state to cross a kink from). Whether a
    crossing explained the drift."""
    assert drift.first_divergence is not None
    outside = drift.first_divergence.step
    since = max(_last_restart(restarts, outside), 0)
    every = port.replay(None, os.path.join(folder, "every.h5"), restarts, lambda index: index >= since, outside + 1)
    with every:
        near = compare(golden, every, tolerance, result_type=type(drift))
    accept(near, explained)
    first = near.first_divergence
    if first is not None and first.step < outside:
        drift.notes.append("first outside the envelope at step %d (%s), found by the port's own run again compared "
                           "at every step from step %d" % (first.step, first.key, since))
        drift.first_divergence = first
        outside = first.step
    lookback = range(outside, max(outside - CROSSING_LOOKBACK, 0) - 1, -1)
    steps = sorted(set(lookback) | set(_jumps(near, outside, restarts)[-CROSSING_JUMPS:]), reverse=True)
    whole = {k for step in steps for k in (step - 1, step)}  # each step searched and the state before it
    window = port.replay(None, os.path.join(folder, "window.h5"), restarts, Whole(whole.__contains__), outside + 1)
    with window:
        return _own_crossing(golden, window, drift, near, port, restarts, steps)


def _jumps(drift: Comparison, outside: int, restarts: "frozenset[int]") -> List[int]:
    """The steps since the last restart, up to `outside`, where the drift's largest error jumped
    CROSSING_JUMP-fold over the step before (where a discontinuity would have sent the run away)."""
    return [step for step in range(max(_last_restart(restarts, outside), 0) + 1, outside + 1) if _jumped(drift, step)]


def _last_restart(restarts: "frozenset[int]", step: int) -> int:
    """The latest step up to `step` where the run restarted from the golden's state (-1: none)."""
    return max([r for r in restarts if r <= step], default=-1)


def _jumped(result: Comparison, step: int) -> bool:
    """Whether the largest error jumped CROSSING_JUMP-fold at `step` over the step before (over
    one eps of scale, where it was smaller)."""
    return _worst_ulps(result, step) >= CROSSING_JUMP * max(_worst_ulps(result, step - 1), 1.0)


def _own_crossing(golden: Trace, own: Trace, drift: Comparison, near: Comparison, port: PortRuns,
                  restarts: "frozenset[int]", steps: Sequence[int]) -> bool:
    """Drift outside the envelope at step t: if a discontinuity sent the port's own run away at
    one of `steps` (latest first: t and the CROSSING_LOOKBACK steps before, and where its error
    jumped; arbiter.crossed), the two trajectories are no longer comparable element by element
    from that step until the run next restarts from the golden's state: drift there is not
    judged. `own` holds the run's state in full at those steps, `near` its comparison there.
    Whether one explained the drift."""
    assert drift.first_divergence is not None
    checked = drift.arbitration = drift.arbitration if drift.arbitration is not None else Arbitrated()
    restarted = _last_restart(restarts, drift.first_divergence.step)
    for step in steps:
        if step <= restarted:
            break  # the run restarted from the golden's state there: nothing of its own before
        crossing = port.apart(lambda: crossed(golden, own, step, port.make_port, port.replay_one))
        if crossing.explained and not _jumped(near, step):
            # a kink crossed where the run's error did not jump: the drift came first (an RMSProp update's
            # round-off sets the float32 and float64 runs apart with no kink at all)
            crossing = replace(crossing, verdict=PORT, side="")
        if crossing.side == "port" and (not crossing.flips or set(dict(failing_steps(near)).get(step, ())) -
                                        {v.key for v in crossing.also}):
            # float32 and float64 apart with no layer deciding otherwise (an RMSProp update's round-off does that),
            # or a tensor that departs from the golden there on which they agree: no crossing of its own explains it
            crossing = replace(crossing, verdict=PORT, side="")
        checked.steps.append(crossing)
        if crossing.explained:
            end = min([r for r in restarts if r > step], default=drift.golden_steps)
            accept(drift, set(range(step, end)))
            drift.notes.append("at step %d a discontinuity sent the port's own run away from the golden (%s): drift "
                               "is not judged over steps %d-%d%s" % (
                                   step, "it crossed a kink itself" if crossing.side == "port"
                                   else "a kink lay between the two trajectories", step, end - 1,
                                   ", up to the run's restart from the golden's state" if end < drift.golden_steps
                                   else ""))
            return True
    return False


def _worst_ulps(result: Comparison, step: int) -> float:
    """The largest finite error at `step` over the float tensors compared, in eps x their scale."""
    worst = [stats.ulps for tensor in result.tensors for stats in [tensor.by_step.get(step)]
             if stats is not None and not stats.discrete and math.isfinite(stats.ulps)]
    return max(worst, default=0.0)
