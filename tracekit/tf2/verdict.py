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
  golden's round-off differs from the port's at every step, not only at the start; replays moved
  only at the start, as tracekit.tf2.calibrate's, stay together far longer), times
  ENVELOPE_MARGIN, over the training profile's floor, with no cap (the arbiter explained every
  local error, so growth is round-off's). The replays are made one at a time, the next only where
  the drift leaves the envelope of those before (_staged): the same verdict, at the cost of one
  replay where the port is inside. Inside is shown beside the local view. These runs capture every
  tensor on the first DRIFT_EVERY steps, every DRIFT_EVERY-th after and the last (the loss and
  learning rate at every step): drift grows smoothly, and the first step outside is then found by
  the port's own run again, in full over the steps up to that sample. A discontinuity the arbiter
  explained sends the two trajectories apart at once, which no perturbed replay need repeat: at
  each such step and the one after, the port's replay and the perturbed ones restart from the
  golden's state (the explained step is then the local view's, accepted), so drift is judged
  between discontinuities. Outside fails, unless a discontinuity sent the port's own run away
  there (tf2/crossing.py; or in the CROSSING_LOOKBACK steps before, or, on a golden kept as
  keyframes, where its error last jumped since the run last restarted: the run again, compared at
  every step from there, tells): from its own state, a layer of its float32 and float64 decides
  otherwise and they disagree on every tensor departing there, or a layer's float64 decisions
  differ between its state and the golden's (a kink lies between the trajectories), and either way
  the error jumped there (CROSSING_JUMP over the step before: drift that grew out of the envelope
  smoothly is the port's). From such a step the two are no longer comparable element by element
  until the run next restarts from the golden's state: drift there is not judged. A golden kept as
  keyframes has no local view: its step 0, where the state after it is whole, goes to the arbiter
  when it fails.

The drift is measured only when the local view passes: a local error already decides.
"""

from __future__ import annotations

import math
import os
import tempfile
from typing import Callable, Optional, Sequence

from ..comparison.accepted import accept, failing_steps
from ..comparison.arbiter import Arbitrated
from ..comparison.calibration import Spread, derive
from ..comparison.engine import compare_data as compare
from ..comparison.result import Comparison
from ..comparison.tolerance import Tolerance
from ..judge.local import ARBITRATED_STEPS, arbitrate_local as local_view
from ..store import Trace
from .arbiter import arbitrate
from .crossing import outside
from .port_runs import PortRuns

ENVELOPE_RUNS = 2
ENVELOPE_MARGIN = 4.0
# The drift view's runs keep the whole state on the first DRIFT_EVERY steps and every DRIFT_EVERY-th after:
# drift grows smoothly, and a full capture costs as much as the step itself (docs/BENCHMARKS.md).
DRIFT_EVERY = 10
JUDGES = ("auto", "plain", "local")


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
    outside (tf2/crossing.py). The round-off training amplifies
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
    """The local view's arbitration (judge/local.py), each step by the float64 arbiter of a fresh
    port (apart, where that is safe)."""
    return local_view(golden, local, lambda step, failing: port.apart(
        lambda: arbitrate(golden, step, failing, port.make_port, port.replay_one)))


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
                if at is None or not outside(golden, own, drift, tolerance, set(explained), port, restarts, folder,
                                             full_at, DRIFT_EVERY, digested) or drift.first_divergence is None or \
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
