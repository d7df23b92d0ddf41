"""A replay compared as it runs, whatever framework runs it: the comparer a replay's loop feeds
(replay/loop.py's Sink), on a thread behind the port's steps. Each adapter's check() hands
compared() a function that runs its replay with the sink and stop it is given."""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ..comparison.comparer import Comparer
from ..comparison.engine import REFRESH_STEPS, comparer
from ..comparison.tolerance import Tolerance
from ..replay.behind import Behind
from ..replay.loop import Replayed, Sink
from ..report.reported import Reported
from ..store import Trace

# run(watch, stop) -> the replay: watch(meta) makes the sink its loop feeds, stop() ends it early.
Run = Callable[[Callable[[Dict[str, Any]], Sink], Optional[Callable[[], bool]]], Replayed]


def compared(run: Run, against: Trace, tolerance: "Tolerance | str | None", out: Optional[str] = None,
             fail_fast: bool = False, measuring: bool = False) -> Tuple[Reported, Replayed]:
    """The replay `run` makes, each step compared as it runs with `against`'s (the golden itself,
    or the drift view's own run): the result, and the replay. fail_fast: stop within a few steps
    of the first divergence; measuring=True: the steps' differences only, as an envelope
    measures them (Live)."""
    live = Live(against, out, tolerance, measuring)
    try:
        replayed = run(live, (lambda: live.diverged) if fail_fast else None)
    except BaseException:
        live.close(quiet=True)  # the replay's error is the news
        raise
    if replayed.trace is not None:
        replayed.trace.close()
    live.close()
    assert live.comparer is not None  # made when the replay started
    return live.comparer.finish(replayed.meta, replayed.steps), replayed  # type: ignore[return-value]


class StepsOnly:
    """A comparer fed the steps and not the initial state."""

    takes_initial = False

    def __init__(self, comparer: Comparer) -> None:
        self.comparer = comparer

    def initial(self, values: Mapping[str, Any]) -> None:
        pass

    def step(self, *args: Any) -> None:
        self.comparer.step(*args)


class Live:
    """The comparison a check feeds: made when the replay knows its own metadata, and run on a
    thread behind the port's steps."""

    def __init__(self, golden: Trace, out: Optional[str], tolerance: "Tolerance | str | None",
                 measuring: bool = False) -> None:
        # measuring: an envelope's perturbed run against the unmoved one (calibration.Spread reads its steps). Its
        # start differs by the nudge: comparing the whole initial state for that, or reading the state back to
        # name a cause, would double the run's peak memory for nothing
        self.golden, self.out, self.tolerance, self.measuring = golden, out, tolerance, measuring
        self.comparer: Optional[Comparer] = None  # once the replay starts
        self._behind: Optional[Behind] = None

    def __call__(self, meta: Dict[str, Any]) -> Behind:
        label = self.out if self.out is not None else "replay of %s (not written)" % meta["program"]["entry"]
        self.comparer = comparer(self.golden, label, meta, self.tolerance, result_type=Reported,
                                 diagnose=not self.measuring)
        self._behind = Behind(StepsOnly(self.comparer) if self.measuring else self.comparer, sync=self._refresh,
                              sync_every=REFRESH_STEPS)
        return self._behind

    def _refresh(self) -> None:
        """Between steps, the comparer's thread idle: judge what it holds, then reopen the golden."""
        assert self.comparer is not None
        self.comparer.drain()
        self.golden.refresh()

    @property
    def diverged(self) -> bool:
        return self.comparer is not None and self.comparer.diverged

    def close(self, quiet: bool = False) -> None:
        """Wait for the steps handed over (raising what comparing them raised, unless quiet); end
        the comparer's reading threads."""
        if self._behind is None or self.comparer is None:
            return
        try:
            self._behind.close(quiet)
            if not quiet:
                self.comparer.drain()  # the last step fed
        finally:
            self.comparer.close()
