from __future__ import annotations

import sys

import pytest

import tracekit

from ..support import write_steps

# The damage-and-fuzz campaign tool is modern-environment only (like every tools/ benchmark):
# the legacy run does not collect its test, rather than skip it.
collect_ignore = ["test_campaign.py"] if sys.version_info < (3, 8) else []


@pytest.fixture
def roundtrip(tmp_path):
    """Write values into one step of a fresh golden and read them back."""
    def run(items, **options):
        path = str(tmp_path / "rt.h5")
        with tracekit.create(path, **options) as w:
            with w.step():
                for key, value in items.items():
                    kind, name = key.split("/", 1)
                    w.add(kind, name, value)
        with tracekit.open(path) as trace:
            step = trace.step(0)
            return {key: step[key] for key in step}
    return run


@pytest.fixture
def small_golden(tmp_path):
    """A finished golden of 5 steps plus initial state, from payloads.step_values."""
    path = str(tmp_path / "small.h5")
    write_steps(path, 5)
    return path

