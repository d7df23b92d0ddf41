"""The comparison's work queue: results in the order put, at most `ahead` calls started ahead,
small calls run when taken, a failing call raises when its result is taken."""

from __future__ import annotations

import threading
import time

import pytest

from tracekit.comparison.pipeline import Pipeline


def test_results_come_in_order_and_no_more_than_ahead_start():
    started, gate = [], threading.Event()

    def call(i):
        def run():
            started.append(i)
            gate.wait(5)
            return i * 10
        return run

    work = Pipeline(workers=2, ahead=3)
    try:
        for i in range(6):
            work.put(call(i), background=True)
        assert not gate.wait(0.2) and sorted(started) == [0, 1]  # two workers busy, a third call queued
        gate.set()
        assert [work.take() for _ in range(6)] == [0, 10, 20, 30, 40, 50]
        assert sorted(started) == list(range(6))
    finally:
        work.close()


def test_no_more_start_than_their_bytes_allow_and_one_always_may():
    started, gate = [], threading.Event()

    def call(i):
        def run():
            started.append(i)
            gate.wait(5)
            return i
        return run

    work = Pipeline(workers=4, ahead=8, budget=100)
    try:
        for i, size in enumerate([60, 30, 20, 500, 10]):
            work.put(call(i), background=True, size=size)
        assert not gate.wait(0.2) and sorted(started) == [0, 1]  # 60 + 30: the 20 would pass 100
        gate.set()
        assert work.take() == 0 and work.take() == 1
        time.sleep(0.2)
        assert 3 not in started  # 500 is over the budget with the 20 held ...
        assert work.take() == 2
        assert [work.take() for _ in range(2)] == [3, 4]  # ... and starts alone once nothing else is
    finally:
        work.close()


def test_small_calls_run_when_taken_on_the_caller_thread():
    threads = []
    work = Pipeline(workers=2)
    try:
        work.put(lambda: threads.append(threading.current_thread()) or "small", background=False)
        work.put(lambda: threading.current_thread().name, background=True)
        assert not threads
        assert work.take() == "small" and threads == [threading.current_thread()]
        assert work.take().startswith("tracekit-compare")
    finally:
        work.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failure_surfaces_when_its_result_is_taken(workers):
    def fail():
        raise ValueError("step 3 unreadable")
    work = Pipeline(workers=workers)
    try:
        work.put(lambda: 1, background=True)
        work.put(fail, background=True)
        work.put(lambda: 3, background=True)
        assert work.take() == 1
        with pytest.raises(ValueError, match="step 3 unreadable"):
            work.take()
        work.cancel()
        with pytest.raises(IndexError):
            work.take()
    finally:
        work.close()
