"""TF1's racy reads of its step counter, fed to the port's schedule for the step.

Where a TF1 learning rate read the step counter unordered with its increment, the golden keeps,
with each step, how far past its value before the step the rate read it (the step's info
COUNTER_READS, record/counter_reads.py). The replay feeds that to what computes the port's rate,
and only to that, for the length of the step:
- a golden counter the port holds in a variable of its own (mapped, or its one held variable: a
  hand-written optimizer's global_step) is moved by the offset before the step and back after
  it, so the port's own schedule reads it as TF1's rate did;
- a golden counter left to the port's Keras optimizers (their `iterations`) is not moved: each
  optimizer's learning-rate schedule is called with its step count plus the offset, so
  nothing else that reads `iterations` (Keras Adam's bias correction) sees the move, as
  nothing else in TF1's step read the racy value.
What was fed is kept for the replay's meta (ReplayMeta.counter_reads) and said in the report.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Tuple

from .optimizer_terms import is_schedule, is_v1
from .tf_import import tf

# How the runner finds a golden counter in the port: (its variable, what it counts a step), the
# port's optimizers (OPTIMIZERS), or None.
OPTIMIZERS = "optimizers"


def racy(golden: Any) -> bool:
    """The golden reports a learning rate racing its step counter (meta["races"])."""
    return any(isinstance(r, Mapping) and "lr" in r and "counter" in r for r in golden.meta.get("races") or ())


class CounterFeed:
    """The offsets of one replay's steps, fed as the module says."""

    def __init__(self, golden: Any) -> None:
        # the schedules' offset: a variable, so that a step traced once reads each step's
        self.offset = tf.Variable(0, dtype=tf.int64, trainable=False, name="tracekit_counter_offset") \
            if racy(golden) else None
        self.schedules = 0  # the port's optimizers' schedules that take it
        self.fed: Dict[str, Dict[str, Any]] = {}  # ReplayMeta.counter_reads
        self._moved: List[Tuple[Any, int]] = []

    def wrap(self, optimizer: Any) -> None:
        """At a Keras optimizer's first update, before it reads its rate: its schedule takes the
        offset from now on (0 outside the steps that feed one)."""
        if self.offset is None or is_v1(optimizer):
            return
        hyper = getattr(optimizer, "_hyper", None)  # legacy OptimizerV2 keeps it among its hyperparameters
        schedule = hyper.get("learning_rate") if isinstance(hyper, dict) else getattr(optimizer, "_learning_rate", None)
        if not is_schedule(schedule):
            return
        if not getattr(type(schedule), "_tracekit_offset", False):
            base, offset, per = type(schedule), self.offset, _calls_per_step(optimizer)

            def __call__(self: Any, step: Any) -> Any:
                return base.__call__(self, step + tf.cast(offset * per, step.dtype))
            # the schedule's own class beneath: the optimizer's isinstance checks and get_config hold
            schedule.__class__ = type(base.__name__, (base,), {"__call__": __call__, "_tracekit_offset": True,
                                                               "__module__": base.__module__})
        self.schedules += 1

    def before(self, counters: Mapping[str, int], find: Callable[[str], Any]) -> None:
        """Before a step: its offsets ({golden counter: offset}) fed; `find` as OPTIMIZERS says."""
        self._moved = []
        for name, offset in counters.items():
            found = find(name)
            if found == OPTIMIZERS:
                if offset and self.offset is not None:
                    self.offset.assign(int(offset))
            elif found is not None and offset:
                variable, by = found[0], int(offset) * found[1]
                variable.assign_add(by)
                self._moved.append((variable, by))

    def after(self, index: int, counters: Mapping[str, int], find: Callable[[str], Any]) -> None:
        """After step `index` (also one that failed): every move undone, and what was fed kept."""
        for variable, by in self._moved:
            variable.assign_sub(by)
        self._moved = []
        if self.offset is not None:
            self.offset.assign(0)
        for name, offset in counters.items():
            found = find(name)
            record = self.fed.setdefault(name, {"port": None, "steps": 0, "moved": 0, "first_moved": None,
                                                "unfed": 0, "first_unfed": None})
            if found is None or (found == OPTIMIZERS and not self.schedules):
                record["unfed"] += 1
                record["first_unfed"] = index if record["first_unfed"] is None else record["first_unfed"]
                continue
            record["port"] = "the port's optimizers' learning-rate schedules" if found == OPTIMIZERS else \
                "the port's %s" % getattr(found[0], "name", "counter")
            record["steps"] += 1
            if offset:
                record["moved"] += 1
                record["first_moved"] = index if record["first_moved"] is None else record["first_moved"]


def _calls_per_step(optimizer: Any) -> int:
    """The schedule's step count per golden step: Keras 3's gradient_accumulation_steps=N
    counts N calls in the variable it passes the schedule."""
    steps = getattr(optimizer, "gradient_accumulation_steps", None)
    return int(steps) if steps else 1
