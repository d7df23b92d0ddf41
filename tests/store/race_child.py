"""One side of tests/store/test_writer_races.py: python -m tests.store.race_child ROLE DIR SCHEDULE

SCHEDULE is a JSON list, one entry per round, of times relative to a start the child reads from
stdin once it has printed "ready" (imported). Role "a" records round i to
DIR/<i>.h5, printing "token i TOKEN" (its recording's), and closes it at its time ("skipped i"
if B's recording came first, on a machine too busy to keep the schedule). Role "b"
starts a recording to the same path at its time and prints "refused i MESSAGE" if that is
refused, else "found i TOKEN" (of the golden that was at the path when it started, or none),
then "done i" or, if its close put it elsewhere, "beside i MESSAGE"."""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

import tracekit


def _wait(until: float) -> None:
    while True:
        left = until - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 0.002) if left < 0.05 else left - 0.04)


def main() -> int:
    role, directory, schedule = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    print("ready", flush=True)
    start = float(sys.stdin.readline())
    schedule = [start + at for at in schedule]
    for index, at in enumerate(schedule):
        path = os.path.join(directory, "%d.h5" % index)
        if role == "a":
            _wait(at - 0.45)  # B starts no earlier than 0.3 s before the close
            try:
                writer = tracekit.create(path, meta={"user": {"writer": "a"}})
            except tracekit.TraceWriteError:  # a slow machine let B's round start first: not this race
                print("skipped %d" % index, flush=True)
                continue
            print("token %d %s" % (index, writer._sink.token), flush=True)
            for k in range(3):
                with writer.step():
                    writer.add("var", "w", np.full(20000, k, np.float32))
            _wait(at)
            writer.close()
        else:
            _wait(at)
            try:
                writer = tracekit.create(path, meta={"user": {"writer": "b"}})
            except tracekit.TraceWriteError as exc:
                print("refused %d %s" % (index, exc), flush=True)
                continue
            found = writer._found  # what the path held as the writer started: what it may replace
            print("found %d %s" % (index, found[2] if found else "none"), flush=True)
            with writer.step():
                writer.add("var", "w", np.full(20000, 9, np.float32))
            try:
                writer.close()
            except tracekit.TraceWriteError as exc:
                print("beside %d %s" % (index, exc), flush=True)
            else:
                print("done %d" % index, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
