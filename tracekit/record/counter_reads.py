"""The step counter as a racy learning rate read it, kept with each step.

TF1 research code increments its step counter in the same run as the update, unordered with
the learning rate's read of it (`tf.group(apply_gradients(...), global_step.assign_add(1))`;
graph.py reports the race): at each step the rate reads the counter before or after it moves,
as the scheduler has it, so the golden's rates are those of the step at some steps and of the
next at others. The recorder fetches that read with the step and keeps, in the step's info,
how far past the counter's value before the step it was (COUNTER_READS: {counter: offset}, 0
or the increment). A replay feeds that offset to the port's schedule for the length of the
step (tf2/counters.py), as it feeds the step's random draws, so a correct port computes the
rate TF1 computed, and a schedule that is wrong shows at its step.

A read is kept only where it is checked: each of the rate's reads of the counter races its
increment and is a numeric op that passes the counter's value on (a cast, a read, an identity),
outside any cond or while loop (a branch not taken has no value to fetch); and at each step
every read saw the counter before or after the step, all of them the same. Otherwise a warning
says why, and the replay compares the rates as it did without (comparison/races.py excuses
such steps in a teacher-forced replay). Python 3.7 syntax.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..keys import COUNTER_READS

__all__ = ["COUNTER_READS", "fetches", "offsets", "rate_races", "split"]

PREFIX = "#counter-read/"  # the recorder's own fetch keys: never a recorded tensor's
# Ops whose first output is the value of their one variable input, as a number.
VALUE_OPS = frozenset(["Cast", "Identity", "ReadVariableOp", "Snapshot"])


def fetches(graph: Any, plan: Any, callable_: bool, warn: Callable[[str], None]) -> Dict[str, Any]:
    """The race reads to fetch with a step of `plan` (graph.StepPlan; `callable_`: a TF1 Keras
    callable runs it) ("#counter-read/<lr key>/<i>" -> tensor): those of each rate whose every
    read of the counter can be kept (module doc)."""
    races = rate_races(plan.races)
    if not races or plan.global_step is None:
        return {}
    if callable_:  # a Keras step's callable fetches what it was made with
        warn("the race of the learning rate with %s in a Keras training step: the value it read is not "
             "recorded, and a replay cannot feed it" % plan.global_step.name)
        return {}
    out = {}
    for race in races:
        why = "it also reads the counter ordered against its increment (%s)" % ", ".join(race["ordered"]) \
            if race.get("ordered") else None
        tensors = []
        for name in race.get("reads") or [race["read"]]:
            try:
                op = graph.get_operation_by_name(name)
            except (KeyError, ValueError):
                why = why or "its read %s is not in the graph" % name
                continue
            dtype = op.outputs[0].dtype if op.outputs else None
            if op.type not in VALUE_OPS or dtype is None or not (dtype.is_integer or dtype.is_floating):
                why = why or "its read %s is a %s op, which does not pass the counter's value on" % (name, op.type)
            elif getattr(op, "_control_flow_context", None) is not None:
                why = why or "its read %s is inside a cond or while loop, whose value a run may not have" % name
            tensors.append(op.outputs[0] if op.outputs else None)
        if why:
            warn("the race of %s with %s: %s, so the value it read is not recorded and a replay cannot feed it"
                 % (race["lr"], race["counter"], why))
            continue
        out.update(("%s%s/%d" % (PREFIX, race["lr"], i), tensor) for i, tensor in enumerate(tensors))
    return out


def rate_races(races: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The races of a learning rate with its step counter, among a step's (graph.StepPlan.races)."""
    return [race for race in races if "lr" in race and "counter" in race and "read" in race]


def split(values: List[Tuple[str, Any]]) -> Tuple[List[Tuple[str, Any]], Dict[str, List[Any]]]:
    """(the step's recorded values, each learning-rate key's race reads) of what a run fetched."""
    kept = [(key, value) for key, value in values if not key.startswith(PREFIX)]
    reads: Dict[str, List[Any]] = {}
    for key, value in values:
        if key.startswith(PREFIX):
            reads.setdefault(key[len(PREFIX):].rsplit("/", 1)[0], []).append(value)
    return kept, reads


def offsets(races: List[Dict[str, Any]], reads: Mapping[str, List[Any]], before: Optional[int],
            after: Optional[int], warn: Callable[[str], None]) -> Dict[str, int]:
    """{counter: how far past its value before the step the rates read it} for this step, each
    read checked to be the counter before or after the step (module doc)."""
    if before is None or after is None:
        return {}
    out: Dict[str, int] = {}
    unknown = set()  # counters whose read is not kept at this step
    for race in rate_races(races):
        counter = race["counter"]
        for value in reads.get(race["lr"], []):
            seen = np.asarray(value).reshape(-1)
            if seen.size != 1 or float(seen[0]) not in (float(before), float(after)):
                # no step number: one sentence, however many steps it holds for
                warn("the race of %s: at some steps its read of %s saw neither the counter's value before the step "
                     "nor after it (a cast that rounds it?): those steps keep no read" % (race["lr"], counter))
                unknown.add(counter)
                continue
            offset = 0 if float(seen[0]) == float(before) else after - before
            if out.get(counter, offset) != offset:
                warn("at some steps the reads of %s read it both before and after its increment: those steps keep "
                     "no read" % counter)
                unknown.add(counter)
            out[counter] = offset
    return {counter: offset for counter, offset in out.items() if counter not in unknown}
