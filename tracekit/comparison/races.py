"""Steps of a teacher-forced replay that a race in the TF1 step explains: the learning rate read
its step counter with no ordering against the counter's increment (the golden's race report,
meta["races"]), and at that step the golden's rate is the port's rate of the next step, not of
this one. TF1 read the counter after it moved; a port that orders the increment (Keras
`iterations`) cannot do so, and should not. Such a step is excused, with that evidence; any
other failing step is the port's. A golden late at every step is not excused: a port whose
schedule runs a step behind TF1's shows the same rates, so some step must show the port's
schedule agreeing with TF1's. The last step has no next rate to show it. numpy only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Collection, Dict, List, Mapping, Tuple

import numpy as np

READ_ULPS = 4.0  # a rate computed from the same counter in either framework agrees to this many ulps


@dataclass(frozen=True)
class RacedStep:
    """`step` of the forced replay: the golden's `key` holds `golden`, the port's rate of the next
    step (`next_rate`), not its own (`port`); `counter` the step counter the race reads."""

    step: int
    key: str
    golden: float
    port: float
    next_rate: float
    counter: str

    def describe(self) -> str:
        return ("step %d excused: a race in the TF1 step, which read %s after its increment: the golden's %s is %.6g, "
                "the port's rate of step %d (%.6g), not of step %d (%.6g). The golden reports the race; a port that "
                "orders the increment cannot take the late read, and should not"
                % (self.step, self.counter, self.key, self.golden, self.step + 1, self.next_rate, self.step, self.port))


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= READ_ULPS * float(np.finfo(np.float32).eps) * max(abs(a), abs(b))


def _agrees_somewhere(values: Mapping[int, Tuple[float, float]]) -> bool:
    """Some step's golden rate is the port's own where the port's rate moves next: the port's schedule
    is TF1's there, so a golden rate that is the port's next one elsewhere is TF1's late read."""
    return any(_same(g, a) and step + 1 in values and not _same(a, values[step + 1][1])
               for step, (g, a) in values.items())


def raced_steps(golden_meta: Mapping[str, Any], rates: Mapping[str, Mapping[int, Tuple[float, float]]],
                fed: Callable[[int], Collection[str]] = lambda step: ()) -> List[RacedStep]:
    """The steps where a learning rate the golden reports racy (meta["races"]) holds the port's rate
    of the next step and not its own; `rates`: each rate's (golden, port) values by step
    (Comparison.rates). Only where the port's rates differ between the two steps (a constant
    stretch of the schedule tells nothing), and where at some other step the golden's rate is the
    port's own (else a port whose schedule lags TF1's by a step looks the same); never at a step
    whose read the golden keeps and the replay fed (`fed(step)`: the counters, its info's
    counter_reads), where the port's rate is its own."""
    out: Dict[int, RacedStep] = {}
    races = [r for r in golden_meta.get("races") or [] if isinstance(r, Mapping) and isinstance(r.get("lr"), str)]
    for race in races:
        values = rates.get(race["lr"]) or {}
        if not _agrees_somewhere(values):
            continue  # late at every step, or the port's schedule one step behind TF1's: the rates cannot tell
        for step, (g, a) in sorted(values.items()):
            later = values.get(step + 1)
            if later is None or step in out or _same(a, later[1]) or race.get("counter") in fed(step):
                continue
            if _same(g, later[1]) and not _same(g, a):
                out[step] = RacedStep(step, race["lr"], g, a, later[1], str(race.get("counter") or "the step counter"))
    return [out[step] for step in sorted(out)]


def counter_notes(fed: Mapping[str, Any]) -> List[str]:
    """What a replay fed of TF1's racy reads of a step counter (ReplayMeta.counter_reads), as notes."""
    out = []
    for counter, record in sorted(fed.items()):
        if not isinstance(record, Mapping):
            continue
        if record.get("moved"):
            out.append("%s read as TF1's racy learning rate read it, past its increment, at %d of the %d steps fed "
                       "(from step %s): %s took it so for the length of those steps"
                       % (counter, record["moved"], record.get("steps", 0), record.get("first_moved"),
                          record.get("port") or "the port's counter"))
        if record.get("unfed"):
            why = record.get("why") or ("the port holds no variable mapped to it, and its optimizers no learning-rate "
                                        "schedule")
            out.append("TF1's racy read of %s not fed at %d steps (from step %s): %s; its rate is compared as computed"
                       % (counter, record["unfed"], record.get("first_unfed"), why))
    return out
