"""The verdict on a long golden: each step's own error, the float64 arbiter on the steps that
fail, and the accumulated drift against the spread of perturbed replays.

Over hundreds of steps a correct port meets a discontinuity sooner or later: a ReLU
pre-activation, a max-pooling tie or a threshold a few ulps from its kink that float32 rounds to
the other side in TF 2's summation order (comparison/arbiter.py). From there its trajectory
leaves the golden's however correct it is, and no fixed tolerance on the accumulated error
tells a port's mistake from that. So a long golden is judged in two views:

- local: the port is replayed teacher-forced (each step from the golden's state), so each
  step's error is its own. A step that fails the tolerance goes to the arbiter; the steps it
  explains are accepted and listed, and the first it does not is the failure, at its step and
  tensor. The arbiter stops at the first unexplained step (the verdict is known) and after
  ARBITRATED_STEPS steps (those after it count as unexplained).
- drift: the port from its own state, compared with the golden under an envelope: the spread of
  ENVELOPE_RUNS replays whose state moved one ulp at the start and again after every step (the
  golden's round-off differs from the port's at every step, not only at the start; replays
  moved only at the start, as tracekit.tf2.calibrate's, stay together far longer), times
  ENVELOPE_MARGIN, over the training profile's floor, with no cap (the arbiter explained every
  local error, so growth is round-off's). The replays are made one at a time, the next only
  where the drift leaves the envelope of those before (_staged): the same verdict, at the cost
  of one replay where the port is inside. Inside is shown beside the local view. These runs
  capture every tensor on the first DRIFT_EVERY steps, every DRIFT_EVERY-th after and the last
  (the loss and learning rate at every step): drift grows smoothly, and the first step outside is
  then found by the port's own run again, in full over the steps up to that sample.
  A discontinuity the arbiter explained sends the two trajectories apart at once, which no
  perturbed replay need repeat: at each such step and the one after, the port's replay and the
  perturbed ones restart from the golden's state (the explained step is then the local view's,
  accepted), so drift is judged between discontinuities. Outside fails, unless a discontinuity
  sent the port's own run away there (or in the CROSSING_LOOKBACK steps before, or, on a golden
  kept as keyframes, where its error last jumped since the run last restarted: the run again,
  compared at every step from there, tells): from its own state, a layer of its float32 and
  float64 decides otherwise and they disagree on every tensor departing there, or a layer's
  float64 decisions differ between its state and the golden's (a kink lies between the
  trajectories), and either way the error jumped there (CROSSING_JUMP over the step before:
  drift that grew out of the envelope smoothly is the port's). From such a step the two are no
  longer comparable element by element until the run next restarts from the golden's state:
  drift there is not judged. A golden kept as keyframes has no local view: its step 0, where
  the state after it is whole, goes to the arbiter when it fails.

The drift is measured only when the local view passes: a local error already decides.
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass, field, replace
from typing import AbstractSet, Callable, Dict, List, Optional, Sequence, Tuple

from ..comparison.arbiter import PORT, Arbitrated
from ..comparison.calibration import CALIBRATED_KINDS, Spread, derive
from ..comparison.engine import compare_data as compare
from ..comparison.races import raced_steps
from ..comparison.result import Comparison, Divergence
from ..comparison.stats import Stats
from ..comparison.tolerance import Tolerance
from ..keys import KIND_ORDER, counters_read
from ..replay.loop import Whole
from ..store import Trace
from .apart import Apart
from .arbiter import MakePort, ReplayOne, arbitrate, crossed

ARBITRATED_STEPS = 16
ENVELOPE_RUNS = 2
ENVELOPE_MARGIN = 4.0
# The drift view's runs keep the whole state on the first DRIFT_EVERY steps and every DRIFT_EVERY-th after:
# drift grows smoothly, and a full capture costs as much as the step itself (docs/BENCHMARKS.md).
DRIFT_EVERY = 10
CROSSING_LOOKBACK = 2  # steps before the first outside the envelope where the port's own crossing is sought
# A kink between the trajectories explains drift outside the envelope only where the error jumped
# there by this factor over the step before: drift that grew smoothly out of it is the port's.
CROSSING_JUMP = 16.0
CROSSING_JUMPS = 2  # the latest steps where the error jumped so, searched beside the lookback's
JUDGES = ("auto", "plain", "local")


@dataclass(frozen=True)
class PortRuns:
    """How the verdict runs the port, each time a fresh one from its factory."""

    check: Callable[[], Comparison]  # the teacher-forced replay, compared as it runs
    # (nudge seed or None, out, steps restarting from the golden's state, steps captured in full, steps to run
    # or None for all) -> a written replay from its own state
    replay: Callable[[Optional[int], str, "frozenset[int]", Optional[Callable[[int], bool]], Optional[int]], Trace]
    # (nudge seed, a replay written from the port's own state, steps restarting, steps captured in full) -> a
    # replay from its own state nudged, compared exactly with that one as it runs
    against: Callable[[int, Trace, "frozenset[int]", Optional[Callable[[int], bool]]], Comparison]
    replay_one: ReplayOne
    make_port: MakePort
    # runs a call that makes ports (a run, the arbiter's steps): in a process of its own where that is safe
    apart: Apart = field(default_factory=Apart)


def judge_long(golden: Trace, port: PortRuns, drift_out: Optional[str] = None) -> Comparison:
    """The local view, arbitrated, and (when it passes) the drift view; `drift_out`: where to keep
    the replay from the port's own state (a temporary file by default)."""
    local = port.check()
    local.judged = "local"
    arbitrated = arbitrate_local(golden, local, port)
    if local.first_divergence is None and not local.missing and local.short is None:
        local.drift = envelope(golden, port, arbitrated, type(local), drift_out)
    _memory_note(local, port)
    return local


def judge_keyframed(golden: Trace, port: PortRuns, keyframes: Sequence[int], result_type: type,
                    out: Optional[str] = None) -> Comparison:
    """A golden that keeps the training state whole only at `keyframes` (the steps after which it
    does) and its initial state, digests between (a real-size model's, under a budget): no step
    can be teacher-forced but those right after them, so it is judged by the drift view alone.
    The port from its own state, restarted from the golden's after each keyframe, is compared
    (digest against digest between keyframes) with the envelope of replays restarted there too
    and moved at every step in their variables and gradients, all measured at the `sampled`
    steps (each band of steps holds one; a digest of every state tensor costs more than the step
    of a real-size model), the loss and learning rate at every step; where a sample is outside,
    the port's run again, compared at every step since it last restarted, finds the first step
    outside (_digested_outside). The round-off training amplifies
    (an Adam update flipping on a gradient at the noise floor, a ReLU crossing) moves them as
    far. A slip the envelope holds is not seen; one that recurs (a learning rate, a decay, a
    loss term) shows at its step (docs/NUMERICS.md)."""
    restarts = frozenset(k + 1 for k in keyframes if k + 1 < len(golden))
    result = envelope(golden, port, Arbitrated(), result_type, out, restarts=restarts, digested=True)
    result.judged = "envelope"
    _memory_note(result, port)
    return result


def _memory_note(result: Comparison, port: PortRuns) -> None:
    """Where the runs that made ports ran (tf2/apart.py), if any did."""
    if port.apart.where:
        result.notes.append("memory: %s" % port.apart.where)


def arbitrate_local(golden: Trace, local: Comparison, port: PortRuns) -> Arbitrated:
    """Arbitrate a teacher-forced comparison's failing steps in order, up to the first the arbiter
    does not explain, and accept those it explains (`local.arbitration` says which); first accept
    the steps a TF1 race explains (comparison/races.py; `local.raced`)."""
    arbitrated = local.arbitration = Arbitrated()
    # a race the golden reports, as the rates show it, at steps whose read the golden did not keep
    local.raced = raced_steps(golden.meta, local.rates, lambda k: counters_read(golden.step(k).info))
    accept(local, {raced.step for raced in local.raced})
    for step, failing in failing_steps(local):
        if step < 0:
            break  # the initial state differs: the variables as loaded, no step to arbitrate
        if len(arbitrated.steps) >= ARBITRATED_STEPS:
            local.notes.append("the arbiter stopped after %d failing steps: later local errors count as the port's"
                               % ARBITRATED_STEPS)
            break
        arbitration = port.apart(lambda: arbitrate(golden, step, failing, port.make_port, port.replay_one))
        arbitrated.steps.append(arbitration)
        if not arbitration.explained:
            break
    accept(local, {a.step for a in arbitrated.explained})
    return arbitrated


def failing(tensor_ok: bool, step: int, noise_steps: object, accept_noise: bool) -> bool:
    return not tensor_ok and not (accept_noise and step in noise_steps)  # type: ignore[operator]


def failing_steps(result: Comparison) -> List[Tuple[int, Dict[str, Stats]]]:
    """(step, {key: stats}) of every step where some tensor fails, unaccepted, in step order."""
    steps: Dict[int, Dict[str, Stats]] = {}
    for tensor in result.tensors:
        for step, stats in tensor.by_step.items():
            if failing(stats.ok, step, tensor.noise, result.tolerance.accept_noise):
                steps.setdefault(step, {})[tensor.key] = stats
    return sorted(steps.items())


def accept(result: Comparison, explained: AbstractSet[int]) -> None:
    """Count the failures of the `explained` steps as accepted, beside those an earlier call
    accepted; the first divergence becomes the first failure at another step."""
    if not explained:
        return
    first: Optional[Tuple[Tuple[int, Tuple[int, int]], Divergence]] = None
    for order, tensor in enumerate(result.tensors):
        still = []
        for step, stats in tensor.by_step.items():
            if step in tensor.judged_steps or not failing(stats.ok, step, tensor.noise, result.tolerance.accept_noise):
                continue
            if step in explained:
                tensor.failed_steps -= 1
                tensor.accepted_steps += 1
                tensor.judged_steps.add(step)
            else:
                still.append(step)
        tensor.first_failed = still[0] if still else None
        # within a step, data-flow order: by kind, then as the tensors came (their order within a kind)
        rank = (KIND_ORDER.get(tensor.kind, len(KIND_ORDER)), order)
        if still and (first is None or (still[0], rank) < first[0]):
            first = ((still[0], rank), Divergence(still[0], tensor.kind, tensor.name, tensor.by_step[still[0]]))
    was = result.first_divergence
    if was is None or was.step in explained:
        result.first_divergence = None if first is None else first[1]


def sampled(index: int) -> bool:
    """The steps the drift view's runs capture in full: the first DRIFT_EVERY and every
    DRIFT_EVERY-th after (each band of calibration.bands holds one), and the golden's last
    (envelope)."""
    return index < DRIFT_EVERY or index % DRIFT_EVERY == 0


def _captured(golden: Trace) -> Callable[[int], bool]:
    """The steps the drift view's runs capture in full: the `sampled` ones and the golden's last,
    where a slip in the last band shows."""
    last = len(golden) - 1
    return lambda index: sampled(index) or index == last


def envelope(golden: Trace, port: PortRuns, arbitrated: Arbitrated, result_type: type, out: Optional[str] = None,
             restarts: "frozenset[int]" = frozenset(), digested: bool = False) -> Comparison:
    """The port from its own state against the envelope of up to ENVELOPE_RUNS perturbed
    replays, restarted from the golden's state at `restarts` and at each explained discontinuity
    and the step after, in full at the `sampled` steps and the last (the loss and learning rate at
    every step; `digested`: a golden kept as keyframes, digests between, judged by this view alone)."""
    full_at = measured = _captured(golden)
    explained = sorted(a.step for a in arbitrated.explained)
    restarts = restarts | frozenset(explained) | frozenset(step + 1 for step in explained)
    judged_first = Arbitrated()  # step 0, where no local view judged it (a golden kept as keyframes)
    with tempfile.TemporaryDirectory(prefix="tracekit-envelope-") as folder:
        spread = Spread()
        with port.replay(None, out or os.path.join(folder, "own.h5"), restarts, full_at, None) as own:
            first = None if 0 in explained else _first_step(golden, own, result_type)
            if first is not None and 1 in restarts:  # the golden's state after step 0 is whole: judge it there
                first = _arbitrated_first(golden, first, port, judged_first)
                explained = [0] + explained if first is None else explained
            if first is not None:
                return first
            for seed in range(ENVELOPE_RUNS):
                spread.add(port.against(seed, own, restarts, measured))
                tolerance = derive(spread, ENVELOPE_MARGIN, cap=math.inf).tolerance
                drift = compare(golden, own, tolerance, result_type=result_type)
                accept(drift, set(explained))
                if drift.first_divergence is None:
                    break  # inside: another replay could only widen the envelope (_staged)
            drift.arbitration = judged_first if judged_first.steps else None
            for _ in range(ARBITRATED_STEPS):  # each crossing explained leaves the drift judged past the next restart
                at = drift.first_divergence.step if drift.first_divergence is not None else None
                if at is None or not _outside(golden, own, drift, tolerance, set(explained), port, restarts, folder,
                                              full_at, digested) or drift.first_divergence is None or \
                        drift.first_divergence.step <= at:
                    break
    sampling = "steps 0-%d, every %dth step after and the last" % (DRIFT_EVERY - 1, DRIFT_EVERY)
    kept = "every tensor compared at %s%s" % (sampling, " (as digests where the golden keeps them)" if digested else "")
    why = "explained discontinuities and the steps after" if explained else "the steps after the golden's keyframes"
    restarted = "; restarted from the golden's state at steps %s (%s)" % (
        ", ".join(map(str, sorted(restarts))), why) if restarts else ""
    drift.notes.append("drift envelope: %s moved in their variables and gradients at every step, their "
                       "largest deviation x %g over the training floor; %s, the loss and learning rate at every "
                       "step%s" % (_staged(spread.runs), ENVELOPE_MARGIN, kept, restarted))
    return drift


def _staged(runs: int) -> str:
    """The perturbed replays made, in words. They are made one at a time, and the next only where
    the drift leaves the envelope so far: the envelope is the runs' largest deviation x margin, so
    another run of the same schedule (the same tensors at the same steps) can only widen it
    (calibration.derive is monotone in such a spread: a move without bound drops the moments'
    bound; tests/comparison/test_calibration.py), and a port inside it is inside any envelope
    more runs would make. The verdict is that of all ENVELOPE_RUNS, at the cost of one where the
    port is inside."""
    made = "%d replay%s" % (runs, "" if runs == 1 else "s")
    return made if runs == ENVELOPE_RUNS else "%s (of up to %d: inside it, more could only widen it)" % (
        made, ENVELOPE_RUNS)


def _first_step(golden: Trace, own: Trace, result_type: type) -> Optional[Comparison]:
    """The initial state and step 0 start from the golden's state: the envelope holds them to the
    default tolerance (comparison/calibration.py), so where they fail it (noise the analysis
    explains accepted, as an envelope may), that is the verdict, and no perturbed run is made.
    Most porting slips (an epsilon, a decay, a bias correction) show there."""
    first = compare(golden, own, Tolerance(accept_noise=True), result_type=result_type, steps=1)
    if first.first_divergence is None or first.first_divergence.step > 0:
        return None
    first.notes.append("step 0 started from the golden's state and fails the default tolerance, which the drift "
                       "envelope keeps there: no perturbed replay was made")
    return first


def _arbitrated_first(golden: Trace, first: Comparison, port: PortRuns, arbitrated: Arbitrated) -> Optional[Comparison]:
    """Step 0 fails the default tolerance where no local view judged it: the float64 arbiter
    judges it as the local view would (an Adam update moves every element by the learning rate
    in its gradient's sign, so a gradient element at the noise floor that flips moves its
    variable by that much). None where it explains the step (its failures are then accepted),
    else `first`, which then shows the arbitration."""
    failing = dict(failing_steps(first))
    if set(failing) != {0}:
        return first  # the initial state as loaded differs: nothing a step explains
    arbitration = port.apart(lambda: arbitrate(golden, 0, failing[0], port.make_port, port.replay_one))
    arbitrated.steps.append(arbitration)
    if arbitration.explained:
        return None
    first.arbitration = arbitrated
    return first


def _outside(golden: Trace, own: Trace, drift: Comparison, tolerance: Tolerance, explained: AbstractSet[int],
             port: PortRuns, restarts: "frozenset[int]", folder: str, captured: Callable[[int], bool],
             digested: bool = False) -> bool:
    """Drift outside the envelope at a step the runs `captured`: the port's own run again, in full
    over the DRIFT_EVERY steps up to it (the same run: a replay is deterministic), finds the first step
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
                         lambda index: index >= outside - DRIFT_EVERY, outside + 1)
    with window:
        near = compare(golden, window, tolerance, result_type=type(drift))
        accept(near, explained)
        first = near.first_divergence
        steps: Sequence[int] = lookback
        if first is not None and first.step < outside:
            drift.notes.append("first outside the envelope at step %d (%s), found by the port's own run again in "
                               "full over steps %d-%d" % (first.step, first.key, outside - DRIFT_EVERY, outside))
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
