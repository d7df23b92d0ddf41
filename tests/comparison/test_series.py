"""A tensor's statistics over steps, kept in flat arrays: every field comes back as stored."""

from __future__ import annotations

import numpy as np
import pytest

from tracekit.comparison.series import StatsSeries
from tracekit.comparison.stats import Stats, compare_values
from tracekit.comparison.tolerance import Resolved

TOL = Resolved(1e-5, 1e-6, False, False, False, 4.0, 2.0 ** -23)


def test_every_field_round_trips():
    rng = np.random.RandomState(0)
    made = {
        -1: compare_values(np.float32(1.0), np.float32(1.0), TOL),  # a scalar, no worst index
        0: compare_values(rng.randn(3, 4, 5).astype(np.float32), rng.randn(3, 4, 5).astype(np.float32), TOL),
        2: compare_values(np.zeros((2, 3)), np.zeros((3, 2)), TOL),  # a shape problem
        5: compare_values(np.array([1.0, np.nan]), np.array([1.0, 2.0]), TOL),  # non-finite
        9: compare_values({"a": 1}, {"a": 2}, TOL),  # structures: exact
    }
    series = StatsSeries()
    for step, stats in made.items():
        series.append(step, stats)
    assert list(series) == list(made) and len(series) == 5
    for step, stats in made.items():
        assert series[step].to_dict() == stats.to_dict()
    assert made[0].worst_index is not None and len(made[0].worst_index) == 3 and made[2].problem
    assert 5 in series and 4 not in series and "5" not in series
    with pytest.raises(KeyError):
        series[4]
    assert [s.ok for s in series.values()] == [True, False, False, False, False]
    assert 5 * (1 + 9 + 6) * 8 < series.nbytes < 5 * 200  # step, 9 floats, 6 integers a step, and worst indices


def test_steps_come_in_order():
    series = StatsSeries()
    series.append(3, Stats())
    with pytest.raises(ValueError, match="step 3 after step 3"):
        series.append(3, Stats())
