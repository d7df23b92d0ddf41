"""Store benchmark: tracekit's golden store against the usual ways of saving arrays.

Same data for every method: the real training state of tf_slim resnet_v1_50
(variables, momentum slots, gradients) written by tools/resnet_data.py in the
legacy environment. Each method runs in its own process (so peak memory is its
own), writes the initial state and every step, then reads everything back, then
opens the file afresh and reads one tensor.

    .venv-legacy/bin/python tools/resnet_data.py          # once, ~1.5 GB in build/bench
    .venv/bin/python tools/bench_store.py [--data DIR] [--keep]

Prints a table and the ratios the targets are stated in: for each method the best
of `--repeat` runs (throughputs, latency) and the largest peak memory. Reading one
tensor is timed twice: warm (the file in the page cache) and cold (its pages evicted
with posix_fadvise before each open, as for a golden nobody read lately). A
benchmark, not a timed test.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ONE_TENSOR = "var/resnet_v1_50/block3/unit_3/bottleneck_v1/conv2/weights:0"

METHODS = {
    "tracekit": "tracekit store: shuffle + zstd-1, XOR-delta on variables and slots",
    "tracekit-nodelta": "tracekit store without delta encoding",
    "tracekit-2x": "tracekit store, the steps written twice (memory must not grow)",
    "savez_compressed": "np.savez_compressed, one archive a step (zlib-6)",
    "h5py-gzip": "h5py, gzip level 4 + shuffle, one dataset a tensor",
    "npy": "np.save, one raw .npy a tensor",
}


# ---- in the child process ------------------------------------------------------------------

def _rss_reset() -> None:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # resets VmHWM, the peak resident set size


def _rss(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def _load(data: str):
    initial = dict(np.load(os.path.join(data, "initial.npz")))
    steps = [dict(np.load(p)) for p in sorted(glob.glob(os.path.join(data, "step_*.npz")))]
    return initial, steps


def _median_ms(fn, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _evict(out: str) -> None:
    """Drop the method's files from the page cache (clean pages: synced first)."""
    os.sync()
    for p in glob.glob(os.path.join(out, "**"), recursive=True):
        if os.path.isfile(p):
            fd = os.open(p, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _kind_sizes(names_sizes):
    out = {"state": [0, 0], "grad": [0, 0]}
    for key, raw, stored in names_sizes:
        bucket = "grad" if key.startswith("grad/") else "state"
        out[bucket][0] += raw
        out[bucket][1] += stored
    return out


def child(method: str, data: str, out: str) -> dict:
    initial, steps = _load(data)
    if method == "tracekit-2x":
        steps = steps + steps
    raw = sum(a.nbytes for a in initial.values()) + sum(a.nbytes for s in steps for a in s.values())
    os.sync()  # start every method with no dirty pages from the one before
    base_rss = _rss("VmRSS")
    _rss_reset()
    t0 = time.perf_counter()
    write = globals()["_write_" + method.split("-")[0].replace("savez_compressed", "savez")]
    path = write(method, initial, steps, out)
    write_s = time.perf_counter() - t0
    peak = _rss("VmHWM") - base_rss
    size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(out, "**"), recursive=True) if os.path.isfile(p))
    t0 = time.perf_counter()
    read = globals()["_read_" + method.split("-")[0].replace("savez_compressed", "savez")]
    got = read(path)
    read_s = time.perf_counter() - t0
    assert got == raw, (got, raw)
    one = globals()["_one_" + method.split("-")[0].replace("savez_compressed", "savez")]
    expected = steps[-1][ONE_TENSOR]
    assert np.array_equal(one(path, len(steps) - 1), expected)
    one_ms = _median_ms(lambda: one(path, len(steps) - 1))
    cold_times = []
    for _ in range(5):
        _evict(out)
        cold_times.append(_median_ms(lambda: one(path, len(steps) - 1), repeat=1))
    one_cold_ms = statistics.median(cold_times)
    kinds = globals()["_sizes_" + method.split("-")[0].replace("savez_compressed", "savez")](path)
    return {"method": method, "raw": raw, "size": size, "write_s": write_s, "read_s": read_s,
            "peak_rss": peak, "open_read_one_ms": one_ms, "open_read_one_cold_ms": one_cold_ms,
            "kinds": _kind_sizes(kinds),
            "trace_steps": len(steps)}


def _split(key):
    return key.split("/", 1)


def _write_tracekit(method, initial, steps, out):
    import tracekit

    path = os.path.join(out, "trace.h5")
    with tracekit.create(path, delta=method != "tracekit-nodelta") as w:
        with w.initial():
            for key, value in initial.items():
                w.add(*_split(key), value=value, copy=False)
        for step in steps:
            with w.step():
                for key, value in step.items():
                    w.add(*_split(key), value=value, copy=False)
    return path


def _read_tracekit(path):
    import tracekit

    total = 0
    with tracekit.open(path) as trace:
        for step in [trace.initial] + list(trace):
            for key in step:
                total += step[key].nbytes
    return total


def _one_tracekit(path, k):
    import tracekit

    with tracekit.open(path) as trace:
        return trace.step(k)[ONE_TENSOR]


def _sizes_tracekit(path):
    import tracekit

    with tracekit.open(path) as trace:
        return [(t.key, t.raw_bytes, t.stored_bytes) for t in trace.catalog]


def _write_savez(method, initial, steps, out):
    np.savez_compressed(os.path.join(out, "initial.npz"), **initial)
    for k, step in enumerate(steps):
        np.savez_compressed(os.path.join(out, "step_%03d.npz" % k), **step)
    return out


def _read_savez(path):
    total = 0
    for p in sorted(glob.glob(os.path.join(path, "*.npz"))):
        with np.load(p) as z:
            for key in z.files:
                total += z[key].nbytes
    return total


def _one_savez(path, k):
    with np.load(os.path.join(path, "step_%03d.npz" % k)) as z:
        return z[ONE_TENSOR]


def _sizes_savez(path):
    out = []
    for p in glob.glob(os.path.join(path, "*.npz")):
        with zipfile.ZipFile(p) as z:
            out.extend((i.filename[:-4], i.file_size, i.compress_size) for i in z.infolist())
    return out


def _write_h5py(method, initial, steps, out):
    import h5py

    path = os.path.join(out, "trace.h5")
    with h5py.File(path, "w") as f:
        for label, values in [("initial", initial)] + [("step_%03d" % k, s) for k, s in enumerate(steps)]:
            group = f.create_group(label)
            for key, value in values.items():
                if value.ndim:
                    group.create_dataset(key.replace("/", "|"), data=value, compression="gzip", shuffle=True,
                                         chunks=value.shape)
                else:  # scalars cannot be filtered
                    group.create_dataset(key.replace("/", "|"), data=value)
    return path


def _read_h5py(path):
    import h5py

    total = 0
    with h5py.File(path, "r") as f:
        for group in f.values():
            for ds in group.values():
                total += ds[()].nbytes
    return total


def _one_h5py(path, k):
    import h5py

    with h5py.File(path, "r") as f:
        return f["step_%03d" % k][ONE_TENSOR.replace("/", "|")][()]


def _sizes_h5py(path):
    import h5py

    out = []
    with h5py.File(path, "r") as f:
        for group in f.values():
            for name, ds in group.items():
                out.append((name.replace("|", "/"), ds.dtype.itemsize * ds.size, ds.id.get_storage_size()))
    return out


def _write_npy(method, initial, steps, out):
    for label, values in [("initial", initial)] + [("step_%03d" % k, s) for k, s in enumerate(steps)]:
        os.makedirs(os.path.join(out, label))
        for key, value in values.items():
            np.save(os.path.join(out, label, key.replace("/", "|") + ".npy"), value)
    return out


def _read_npy(path):
    return sum(np.load(p).nbytes for p in glob.glob(os.path.join(path, "*", "*.npy")))


def _one_npy(path, k):
    return np.load(os.path.join(path, "step_%03d" % k, ONE_TENSOR.replace("/", "|") + ".npy"))


def _sizes_npy(path):
    out = []
    for p in glob.glob(os.path.join(path, "*", "*.npy")):
        key = os.path.basename(p)[:-4].replace("|", "/")
        out.append((key, np.load(p, mmap_mode="r").nbytes, os.path.getsize(p)))
    return out


# ---- in the parent -------------------------------------------------------------------------

def _mb(n):
    return n / 1e6


def report(results):
    by = {r["method"]: r for r in results}
    lines = ["| method | write MB/s | read MB/s | size ratio | state ratio | grad ratio | peak memory MB "
             "| open + read one tensor ms, warm | cold |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        st, gr = r["kinds"]["state"], r["kinds"]["grad"]
        lines.append("| %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.0f | %.1f | %.1f |" % (
            r["method"], _mb(r["raw"]) / r["write_s"], _mb(r["raw"]) / r["read_s"], r["raw"] / r["size"],
            st[0] / st[1], gr[0] / gr[1], _mb(r["peak_rss"]), r["open_read_one_ms"], r["open_read_one_cold_ms"]))
    tk, sz = by.get("tracekit"), by.get("savez_compressed")
    lines.append("")
    if tk and sz:
        speed = (tk["raw"] / tk["write_s"]) / (sz["raw"] / sz["write_s"])
        lines.append("- write throughput, tracekit / np.savez_compressed: %.1fx (target >= 10x)" % speed)
        lines.append("- size ratio, tracekit / np.savez_compressed: %.2f vs %.2f (target: equal or better)"
                     % (tk["raw"] / tk["size"], sz["raw"] / sz["size"]))
        st = tk["kinds"]["state"]
        lines.append("- variable + slot snapshots with delta encoding: ratio %.2f (target >= 1.3)" % (st[0] / st[1]))
        lines.append("- open a %.2f GB trace and read one tensor: %.1f ms warm, %.1f ms cold (target < 50 ms)"
                     % (tk["size"] / 1e9, tk["open_read_one_ms"], tk["open_read_one_cold_ms"]))
    two = by.get("tracekit-2x")
    if tk and two:
        lines.append("- writer peak memory: %.0f MB for %d steps, %.0f MB for %d steps (bounded by "
                     "max_pending_bytes and one snapshot, not by the trace's length)"
                     % (_mb(tk["peak_rss"]), tk["trace_steps"], _mb(two["peak_rss"]), two["trace_steps"]))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.path.join(ROOT, "build", "bench", "resnet_v1_50"))
    parser.add_argument("--work", default=os.path.join(ROOT, "build", "bench", "out"))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per method; the best throughput of them is reported (this VM's page "
                             "cache makes single runs vary by 30%%)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.data, args.work)))
        return
    if not os.path.exists(os.path.join(args.data, "initial.npz")):
        sys.exit("no benchmark data in %s: run `.venv-legacy/bin/python tools/resnet_data.py` first" % args.data)
    results = []
    for method in args.methods.split(","):
        runs = []
        for rep in range(args.repeat):
            out = os.path.join(args.work, method)
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            print("running %s (%d/%d): %s ..." % (method, rep + 1, args.repeat, METHODS[method]),
                  file=sys.stderr, flush=True)
            proc = subprocess.run([sys.executable, __file__, "--child", method, "--data", args.data,
                                   "--work", out], stdout=subprocess.PIPE, check=True, universal_newlines=True)
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            shutil.rmtree(out, ignore_errors=True)
        best = dict(runs[0])
        for key in ("write_s", "read_s", "open_read_one_ms", "open_read_one_cold_ms"):
            best[key] = min(r[key] for r in runs)
        best["peak_rss"] = max(r["peak_rss"] for r in runs)
        best["runs"] = runs
        results.append(best)
    text = report(results)
    print(text)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
