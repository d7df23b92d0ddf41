"""The step counter as a racy learning rate read it, kept with each step.

TF1 research code increments its step counter in the same run as the update, unordered with
the learning rate's read of it (`tf.group(apply_gradients(...), global_step.assign_add(1))`;
graph.py reports the race): at each step the rate reads the counter before or after it moves,
as the scheduler has it, so the golden's rates are those of the step at some steps and of the
next at others. The recorder fetches that read with the step and keeps, in the step's info,
how far past the counter's value before the step it was (COUNTER_READS: {counter: offset}, 0
or the increment). A replay moves the port's counter by that offset for the length of the step
(replay/tf2_runner.py), as it feeds the step's random draws, so a correct port computes the rate
TF1 computed, and a schedule that is wrong shows at its step.

A read is kept only where it is checked: its op passes the counter's value on (a cast, an
identity) and the value it saw is the counter before or after the step, at every step; a
step where two rates reading one counter saw it at different points keeps neither. Otherwise
a warning says why, and the replay compares the rates as it did without (comparison/races.py
excuses such steps in a teacher-forced replay). Python 3.7 syntax.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..keys import COUNTER_READS

__all__ = ["COUNTER_READS", "fetches", "offsets", "rate_races", "split"]

PREFIX = "#counter-read/"  # the recorder's own fetch keys: never a recorded tensor's
# Ops whose first output is the value of their one variable input, as a number.
VALUE_OPS = frozenset(["Cast", "Identity", "ReadVariableOp", "Snapshot"])


def fetches(graph: Any, races: List[Dict[str, str]], warn: Callable[[str], None]) -> Dict[str, Any]:
    """The race reads to fetch with a step (key -> tensor), those whose op passes the counter on."""
    out = {}
    for race in rate_races(races):
        try:
            op = graph.get_operation_by_name(race["read"])
        except (KeyError, ValueError):
            continue
        if op.type not in VALUE_OPS or not op.outputs:
            warn("the race of %s: its read of %s is a %s op, which does not pass the counter's value on, so the "
                 "value it read is not recorded and a replay cannot feed it" % (race["lr"], race["counter"], op.type))
            continue
        out[PREFIX + race["lr"]] = op.outputs[0]
    return out


def rate_races(races: List[Dict[str, str]]) -> List[Dict[str, str]]:
    """The races of a learning rate with its step counter, among a step's (graph.StepPlan.races)."""
    return [race for race in races if "lr" in race and "counter" in race and "read" in race]


def split(values: List[Tuple[str, Any]]) -> Tuple[List[Tuple[str, Any]], Dict[str, Any]]:
    """(the step's recorded values, the race reads by learning-rate key) of what a run fetched."""
    kept = [(key, value) for key, value in values if not key.startswith(PREFIX)]
    reads = {key[len(PREFIX):]: value for key, value in values if key.startswith(PREFIX)}
    return kept, reads


def offsets(races: List[Dict[str, str]], reads: Mapping[str, Any], before: Optional[int], after: Optional[int],
            step: int, warn: Callable[[str], None]) -> Dict[str, int]:
    """{counter: how far past its value before the step the rates read it} for this step, each
    read checked to be the counter before or after the step (module doc)."""
    if before is None or after is None:
        return {}
    out: Dict[str, int] = {}
    unknown = set()  # counters whose read is not kept at this step
    for race in rate_races(races):
        if race["lr"] not in reads:
            continue
        seen = np.asarray(reads[race["lr"]]).reshape(-1)
        counter = race["counter"]
        if seen.size != 1 or float(seen[0]) not in (float(before), float(after)):
            warn("the race of %s: at step %d its read of %s saw %s, neither the counter's %d before the step nor its "
                 "%d after: the value read is not recorded there" % (race["lr"], step, counter, seen.tolist(), before,
                                                                     after))
            unknown.add(counter)
            continue
        offset = 0 if float(seen[0]) == float(before) else after - before
        if out.get(counter, offset) != offset:
            warn("at step %d the rates reading %s read it before and after its increment: the value read is not "
                 "recorded there" % (step, counter))
            unknown.add(counter)
        out[counter] = offset
    return {counter: offset for counter, offset in out.items() if counter not in unknown}
