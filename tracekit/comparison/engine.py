"""Comparing a replayed trace with its golden: per tensor and step statistics, and the
first divergence in data-flow order (step, then inputs, random draws, taps in recorded
order, loss, learning rate, gradients, updated variables and slots).

compare() is the entry point: it opens both traces, chooses the tolerance from what differs
between their environments (envdiff.py) and feeds a Comparer (comparer.py) the replay's
steps; result.py holds what it finds, diagnosis.py what explains it."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Type

from ..keys import PROGRAM
from ..store import Trace, open_trace
from ..store.meta import ProgramMeta, replay_of
from .comparer import Comparer
from .envdiff import default_profile, environment_diff
from .result import Comparison
from .tolerance import Tolerance

# Steps between Trace.refresh calls: memory stays flat however many steps are compared.
REFRESH_STEPS = 16


def compare_data(golden: "str | Trace", actual: "str | Trace", tolerance: "Tolerance | str | None" = None,
                 result_type: Type[Comparison] = Comparison,
                 progress: Optional[Callable[[int, int], None]] = None, steps: Optional[int] = None,
                 diagnose: bool = True) -> Comparison:
    """Compare a replayed trace (or any trace) with the golden, tensor by tensor, step by step.
    The result is data; `tracekit.compare` returns a `result_type` that can also render
    itself (report/comparison.py).

    Without a tolerance, what the traces are chooses one (envdiff.default_profile): the
    default Tolerance() for other code (a port replayed against its golden) or another
    TensorFlow; for the same code on the same TensorFlow, bit for bit when nothing that
    selects kernels differs, else the cross-machine round-off bound. `tolerance` may also
    name a profile (profiles.PROFILES: "default", "training", "exact", ...). progress(steps compared, steps to
    compare) is called after each step. `steps`: compare only the first so many. diagnose=False: a
    measurement (comparer)."""
    own = []  # traces opened here are closed here
    if not isinstance(golden, Trace):
        golden = open_trace(golden)
        own.append(golden)
    if not isinstance(actual, Trace):
        actual = open_trace(actual)
        own.append(actual)
    try:
        return _compare(golden, actual, comparer(golden, actual.path, actual.meta, tolerance, result_type, diagnose),
                        progress, steps)
    finally:
        for trace in own:
            trace.close()


def same_code(golden_meta: Mapping[str, Any], actual_meta: Mapping[str, Any]) -> Optional[bool]:
    """Whether the same program computed both traces: their meta["program"] (entry point and
    source hash) agree. Without it (traces from an older tracekit), a replay compared with a
    recording is a port (False) and two recordings or two replays may be the same code (None)."""
    g, a = ProgramMeta.of(golden_meta.get(PROGRAM)), ProgramMeta.of(actual_meta.get(PROGRAM))
    if g.sha256 and a.sha256:
        return g.entry == a.entry and g.sha256 == a.sha256
    if (replay_of(golden_meta) is None) != (replay_of(actual_meta) is None):
        return False
    return None


def comparer(golden: Trace, actual: str, actual_meta: Mapping[str, Any], tolerance: "Tolerance | str | None" = None,
             result_type: Type[Comparison] = Comparison, diagnose: bool = True) -> "Comparer":
    """A Comparer of `golden` with the replay `actual` (a path, or what names a replay not
    written), whose metadata (environment, program) is `actual_meta`; the tolerance as for compare;
    diagnose=False: a measurement, no cause sought (Comparer)."""
    diff = environment_diff(golden.meta, actual_meta)
    code = same_code(golden.meta, actual_meta)
    return Comparer(golden, actual, default_profile(diff, code is False, tolerance), diff, code, result_type,
                    replay_of(actual_meta), diagnose)


def _compare(golden: Trace, actual: Trace, comparer: "Comparer",
             progress: Optional[Callable[[int, int], None]] = None, steps: Optional[int] = None) -> Comparison:
    replay = replay_of(actual.meta)
    reasons = replay.not_replayed if replay is not None else {}  # key -> why, from the replayer
    count = min(len(golden), len(actual), len(golden) if steps is None else steps)
    with comparer:
        if golden.has_initial and actual.has_initial:
            comparer.initial(actual.initial, reasons)
        for index in range(count):
            comparer.step(index, actual.step(index), reasons)
            if progress is not None:
                progress(index + 1, count)
            if (index + 1) % REFRESH_STEPS == 0:
                comparer.drain()  # no read in flight
                golden.refresh()
                actual.refresh()
        return comparer.finish(actual.meta, len(actual))
