from __future__ import annotations

import os

import pytest

import tracekit

from . import payloads


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


def write_steps(path, n, big=False, **options):
    with tracekit.create(path, meta={"user": {"test": True}}, **options) as w:
        with w.initial():
            for key, value in payloads.initial_values().items():
                w.add(*key.split("/", 1), value=value)
        for k in range(n):
            with w.step(info={"global_step": k + 1}):
                for key, value in payloads.step_values(k, big).items():
                    w.add(*key.split("/", 1), value=value)
    return path
