"""The float64 arbiter's one-step judgement, framework-free: a one-step excerpt of the golden
replayed by the adapter's port in float64 (torch/arbiter.py: model.double(); jax/arbiter.py:
the train state cast up under jax_enable_x64), from the golden's state before the step, and
compared with the golden under the arbiter's tolerance (comparison/arbiter.py judges). Where the
float64 port agrees with the golden on every tensor the float32 port fails, the float32 port's
difference is round-off that a discontinuity (a ReLU's kink, a max-pooling tie) carried: the step
is explained. The layers whose decisions flipped are not sought here (TensorFlow's arbiter probes
them): a step the float64 port does not settle counts as the port's."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import replace
from typing import Callable, Mapping

from ..comparison.arbiter import Arbitration, arbiter_tolerance, golden_before, judge, step_stats, undecided
from ..comparison.downstream import by_update
from ..comparison.engine import compare_data as compare
from ..comparison.stats import Stats
from ..errors import TracekitError
from ..store import Trace
from ..store.excerpt import write_excerpt

# (a one-step excerpt's path, where to write) -> the float64 port's replay of that step, written
RunOne = Callable[[str, str], Trace]


def arbitrate_step(golden: Trace, index: int, failing: Mapping[str, Stats], run_one: RunOne) -> Arbitration:
    """Judge step `index` of `golden`, whose float32 port fails there on `failing` (key -> stats)."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tracekit-arbiter-") as folder:
        excerpt = write_excerpt(golden, index, os.path.join(folder, "step.h5"))
        try:
            ran = run_one(excerpt, os.path.join(folder, "float64.h5"))
        except (TracekitError, RuntimeError, TypeError, ValueError) as exc:  # the port cannot compute in float64
            return undecided(index, "the port did not run in float64: %s" % exc, time.perf_counter() - start)
        with ran:
            values = ran.step(0)
            stats = step_stats(compare(excerpt, ran, arbiter_tolerance(), diagnose=False))
            before = golden_before(golden, index)
            stats, updated = by_update(golden.meta, before, golden.step(index), values, stats, arbiter_tolerance())
    verdict = judge(index, failing, stats, (), 0.0, by_update=updated)
    return replace(verdict, seconds=time.perf_counter() - start)
