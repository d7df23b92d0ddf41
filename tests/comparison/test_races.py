"""Steps a TF1 race explains (comparison/races.py): where the golden reports its learning rate
racy and holds the port's next rate, not its own. Generated schedules and late reads: exactly
the late steps are excused (not the last, which has no next rate), none where the golden is late
at every step (a port a step behind looks the same), none without the race report, and none
for a port whose schedule lags TF1's by a step."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.comparison.races import raced_steps

RACES = {"races": [{"lr": "lr/learning_rate", "counter": "global_step:0", "read": "Read", "increment": "Add"}]}


def _schedule(kind, base, decay):
    if kind == "exponential":
        return lambda c: float(np.float32(base * decay ** c))
    return lambda c: float(np.float32(base * max(0.0, 1.0 - c / 64.0)))  # polynomial, to zero at 64


SCHEDULES = st.tuples(st.sampled_from(["exponential", "polynomial"]), st.floats(1e-4, 1.0), st.floats(0.3, 0.99))


@settings(max_examples=40, deadline=None)
@given(SCHEDULES, st.integers(2, 40), st.data())
def test_exactly_the_late_reads_are_excused(schedule, steps, data):
    rate = _schedule(*schedule)
    late = data.draw(st.sets(st.integers(0, steps - 1)))
    # forced: the port's step k starts from the golden's counter after step k - 1, which is k
    rates = {"lr/learning_rate": {k: (rate(k + 1) if k in late else rate(k), rate(k)) for k in range(steps)}}
    found = raced_steps(RACES, rates)
    shown = any(k not in late for k in range(steps - 1))  # some step shows the port's schedule is TF1's
    assert [r.step for r in found] == (sorted(k for k in late if k < steps - 1) if shown else [])
    for raced in found:
        assert raced.golden == raced.next_rate != raced.port and raced.counter == "global_step:0"
        assert "step %d excused: a race in the TF1 step" % raced.step in raced.describe()
    assert raced_steps({}, rates) == []  # no race reported: nothing is excused


@settings(max_examples=40, deadline=None)
@given(SCHEDULES, st.integers(2, 40))
def test_a_port_a_step_behind_is_not_a_race(schedule, steps):
    rate = _schedule(*schedule)
    rates = {"lr/learning_rate": {k: (rate(k), rate(k - 1)) for k in range(steps)}}
    assert raced_steps(RACES, rates) == []
