"""Integer tensors (step counters, ids, masks) are compared exactly and shown as integers: how far
apart they are, and no relative error, tolerance or ulps, which mean nothing there."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit

from ..support import build_golden


def counter_traces(tmp_path, dtype, golden_value, actual_value):
    def steps(value):
        yield {"loss/loss": np.float32(1.0), "var/global_step:0": np.array(value, dtype),
               "var/w:0": np.ones(3, "f4")}
    golden = build_golden(str(tmp_path / "golden.h5"), steps(golden_value))
    actual = build_golden(str(tmp_path / "actual.h5"), steps(actual_value))
    return golden, actual


@pytest.mark.parametrize("dtype, golden_value, actual_value, apart", [
    ("int64", 7, 1, "6"), ("int32", -3, 4, "7"), ("uint64", 2 ** 64 - 1, 0, "1.84e+19"), ("bool", True, False, "1"),
])
def test_a_counter_that_differs_shows_how_far_apart(tmp_path, dtype, golden_value, actual_value, apart):
    result = tracekit.compare(*counter_traces(tmp_path, dtype, golden_value, actual_value))
    assert not result.ok
    stats = result.tensor("var", "global_step:0").by_step[0]
    assert stats.discrete and stats.max_abs == float(abs(int(golden_value) - int(actual_value)))
    report = result.report()
    row, = [line for line in report.splitlines() if "global_step:0" in line and "FAIL" in line]
    assert row.split()[-5:] == [apart, "-", "-", "-", "-"], row
    assert "inf" not in row
    assert "at most %s apart" % apart in report
    assert "golden %r, actual %r" % (np.array(golden_value, dtype).item(), np.array(actual_value, dtype).item()) \
        in report


def test_equal_counters_pass(tmp_path):
    assert tracekit.compare(*counter_traces(tmp_path, "int64", 7, 7)).ok
