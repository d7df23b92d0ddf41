"""A writer to be killed: records `steps` steps from payloads, announcing progress on stdout.

    python -m tests.store.crash_child PATH STEPS
Prints "begin k" before step k, "committed k" once end_step(k) returned, "closing"
and "closed" around close(). Runs in both environments.
"""

from __future__ import annotations

import sys

import numpy as np

import tracekit
from tests.support import payloads


def big(step):
    return np.random.RandomState(step).randn(512, 1024).astype("f4")  # 2 MiB: kills land mid-write


def main():
    path, steps = sys.argv[1], int(sys.argv[2])
    w = tracekit.create(path)
    with w.initial():
        for key, value in payloads.initial_values().items():
            w.add(*key.split("/", 1), value=value)
    for k in range(steps):
        print("begin %d" % k, flush=True)
        w.begin_step(info={"global_step": k + 1})
        for key, value in payloads.step_values(k).items():
            w.add(*key.split("/", 1), value=value)
        w.add("tap", "big", big(k))
        w.end_step()
        print("committed %d" % k, flush=True)
    print("closing", flush=True)
    w.close()
    print("closed", flush=True)


if __name__ == "__main__":
    main()
