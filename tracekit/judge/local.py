"""The local view of a verdict, framework-free: a teacher-forced comparison (each step from the
golden's state, so each step's error is its own) whose failing steps go, in order, to the
adapter's float64 arbiter; the steps it explains (round-off through a discontinuity) are
accepted and listed, and the first it does not is the failure. It stops at the first unexplained
step (the verdict is known) and after ARBITRATED_STEPS steps (those after it count as
unexplained). The steps a TF1 race explains are accepted first (comparison/races.py)."""

from __future__ import annotations

from typing import Callable, Mapping

from ..comparison.accepted import accept, failing_steps
from ..comparison.arbiter import Arbitrated, Arbitration
from ..comparison.races import raced_steps
from ..comparison.result import Comparison
from ..comparison.stats import Stats
from ..keys import counters_read
from ..store import Trace

ARBITRATED_STEPS = 16

# (step, its failing tensors: key -> statistics against the golden) -> the arbiter's verdict on it
Arbiter = Callable[[int, Mapping[str, Stats]], Arbitration]


def arbitrate_local(golden: Trace, local: Comparison, arbitrate: Arbiter) -> Arbitrated:
    """Arbitrate a teacher-forced comparison's failing steps in order, up to the first the arbiter
    does not explain, and accept those it explains (`local.arbitration` says which)."""
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
        arbitration = arbitrate(step, failing)
        arbitrated.steps.append(arbitration)
        if not arbitration.explained:
            break
    accept(local, {a.step for a in arbitrated.explained})
    return arbitrated
