"""A recording to race another: python -m tests.store.writer_child PATH NAME START_AT [STEPS]

START_AT "-": prints "ready" once imported and reads the start time from stdin. Waits until the
wall clock reads START_AT, then records STEPS steps (each ~20 ms) to PATH
with meta {"user": {"writer": NAME}}. Prints "done T" or "refused T <message>" (T: the time
it ended) and exits 0, or 3 when refused."""

from __future__ import annotations

import sys
import time

import numpy as np

import tracekit


def main() -> int:
    path, name = sys.argv[1], sys.argv[2]
    if sys.argv[3] == "-":  # imported: say so, then take the start time from stdin
        print("ready", flush=True)
        start_at = float(sys.stdin.readline())
    else:
        start_at = float(sys.argv[3])
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    while time.time() < start_at:
        time.sleep(0.001)
    try:
        with tracekit.create(path, meta={"user": {"writer": name}}) as w:
            for k in range(steps):
                with w.step():
                    w.add("loss", "loss", np.float32(k))
                    w.add("var", "w", np.full(20000, k, np.float32))
                time.sleep(0.02)
    except tracekit.TraceWriteError as exc:
        print("refused %f %s" % (time.time(), exc), flush=True)
        return 3
    print("done %f" % time.time(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
