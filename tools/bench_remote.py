"""What reading a golden at a URL fetches and costs, beside reading the same file locally.

Builds a golden of random float32 tensors (--mb, over --steps steps), serves its folder over HTTP on 127.0.0.1 with the
tests' static file server (tests/support/remote.py, which answers Range requests and counts the
bytes it sends), and runs, in this process, each with a cold range cache unless it says warm:

  tracekit show            the CLI command, local file and URL (and the URL again, warm)
  read one step            tracekit.open, then every value of the middle step
  read everything          every value of every step (what a replay and its comparison read)

For the URL it reports the bytes the server sent, as a share of the file, the requests, and the
time; the local times beside them: the first opening of a local golden walks it to screen it
(tracekit/store/_screen.py), so the local read is timed with that walk and again without it.
A benchmark, not a timed test.

    .venv/bin/python tools/bench_remote.py [--mb 500] [--steps 20] [--golden PATH] [--https]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sys
import tempfile
import time

STORED = 0.846  # what normal random float32 keeps of its size, compressed (zstd takes the exponents' redundancy)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)


def _timed(run):
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        result = run()
    return time.perf_counter() - start, result


def _cold(folder, ranges=True):
    """No screen answers (a local golden is walked again at its next opening, as the first time a
    machine opens it) and, with `ranges`, a new, empty range cache (in `folder`)."""
    from tracekit.store import _screen

    if ranges:
        os.environ["TRACEKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="cache-", dir=folder)
    _screen.forget()


def _read_step(where, k):
    import tracekit

    with tracekit.open(where) as trace:
        step = trace.step(k)
        return sum(getattr(step[key], "nbytes", 0) for key in step)


def _read_all(where):
    import tracekit

    with tracekit.open(where) as trace:
        return sum(getattr(step[key], "nbytes", 0) for step in trace for key in step)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=500, help="size of the golden to build (default 500)")
    parser.add_argument("--steps", type=int, default=20, help="its steps (default 20)")
    parser.add_argument("--golden", help="measure this golden instead of building one")
    parser.add_argument("--https", action="store_true",
                        help="serve over HTTPS, with a certificate made here and trusted through SSL_CERT_FILE")
    args = parser.parse_args(argv)

    import tracekit
    from tests.support.remote import RangedServer, random_golden, self_signed
    from tracekit.cli import main as cli
    from tracekit.store import remote

    folder = tempfile.mkdtemp(prefix="tracekit-bench-remote-")
    caches = os.path.join(folder, "caches")  # a subfolder: the server serves top-level files only
    os.mkdir(caches)
    try:
        path = os.path.join(folder, "golden.h5")
        if args.golden:
            os.symlink(os.path.abspath(args.golden), path)
        else:
            elements = int(args.mb * 1e6 / STORED / args.steps / 2 / 4)  # two float32 tensors a step
            start = time.perf_counter()
            random_golden(path, args.steps, (elements // 1024, 1024))
            print("built %s: %.0f MB, %d steps, in %.1f s" % (path, os.path.getsize(path) / 1e6, args.steps,
                                                              time.perf_counter() - start))
        size = os.path.getsize(path)
        tls = None
        if args.https:  # set before aiohttp is imported (at the first URL): it reads the CAs then
            os.mkdir(os.path.join(folder, "tls"))  # a subfolder: the server serves top-level files only
            tls = self_signed(os.path.join(folder, "tls"))
            os.environ["SSL_CERT_FILE"] = tls[0]
        with RangedServer(folder, tls=tls) as server:
            url = server.url("golden.h5")
            with tracekit.open(path) as trace:
                middle = len(trace) // 2
            rows = []

            def measure(label, run, warm=False):
                _cold(caches, ranges=not warm)
                screened, _ = _timed(lambda: run(path))
                local, _ = _timed(lambda: run(path))
                if not warm:
                    _cold(caches)
                server.reset()
                took, _ = _timed(lambda: run(url))
                rows.append((label, server.sent, len(server.requests), took, screened, local))

            measure("tracekit show", lambda where: cli(["show", where]))
            measure("tracekit show, warm", lambda where: cli(["show", where]), warm=True)
            measure("read one step", lambda where: _read_step(where, middle))
            measure("read one step, warm", lambda where: _read_step(where, middle), warm=True)
            measure("read everything", _read_all)
        print("golden %s: %.1f MB, served at %s; blocks of %d KiB\n" % (path, size / 1e6, url, remote.BLOCK_SIZE >> 10))
        print("%-22s %13s %8s %9s %8s %17s %7s" % ("", "URL: fetched", "share", "requests", "time",
                                                    "local: screened", "again"))
        for label, sent, requests, took, screened, again in rows:
            print("%-22s %10.2f MB %7.3f%% %9d %7.2fs %16.2fs %6.2fs"
                  % (label, sent / 1e6, 100.0 * sent / size, requests, took, screened, again))
        print("\n(warm: the range cache holds what the row above fetched; local reads come from the page cache)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
