"""Compare benchmark: tracekit.compare against the floor of the work it must do, in one run.

Data: the MLP goldens of tools/mlp_data.py (recorded by tracekit on TF 1.15, in the
legacy environment) and their replays through the TF2 port tools/ports/mlp.py; both are
made on the first run (a few minutes) and kept under --data:

    .venv/bin/python tools/bench_compare.py [--data build/bench/mlp] [--repeat 3]

Sections, each measured in its own process (its own peak memory), the same pair of files:

    compare         tracekit.compare(golden, replay) of the big MLP (20 steps, ~2 GB of tensors
                    per side), in MB of tensors per side per second
    decode floor    the least reading both files costs: every chunk read raw from HDF5,
                    zstd-decompressed, unshuffled and compared with np.array_equal, serially
    allclose        np.allclose over every pair of values already in memory (no reading)
    read            reading every value of the golden through tracekit, and the floor: its
                    chunks raw + zstd + unshuffle
    busy core       compare and the decode floor again while another process keeps one
                    core busy (a CI machine running something else)
    memory          peak memory of compare over 10, 100 and 400 steps of the small MLP
    many tensors    compare of a step with 8,000 scalar tensors (4,000 variables and gradients)

Prints each figure as the best of --repeat runs with the spread (max - min) / min, and
the ratios the targets are stated in. A benchmark, not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LEGACY = os.path.join(ROOT, ".venv-legacy", "bin", "python")
HIDDEN = {"big": (1536, 1536, 1536), "small": (128,)}
MEMORY_STEPS = (10, 100, 400)


# ---- data ---------------------------------------------------------------------------------

def prepare(data: str) -> None:
    """The goldens (legacy environment) and the replays (this one) the sections read."""
    missing = [name for name in ("big", "small", "many") if not os.path.exists(os.path.join(data, name + ".h5"))]
    if missing:
        if not os.path.exists(LEGACY):
            sys.exit("bench: the goldens are recorded on the legacy environment (tools/bootstrap makes it)")
        print("recording %s on TF 1.15 ..." % ", ".join(missing), file=sys.stderr)
        subprocess.run([LEGACY, os.path.join(HERE, "mlp_data.py"), "--out", data, "--only", ",".join(missing)],
                       check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    replays = [("big", None), ("many", None)] + [("small", n) for n in MEMORY_STEPS]
    for name, steps in replays:
        if not os.path.exists(actual_path(data, name, steps)):
            print("replaying %s%s ..." % (name, "" if steps is None else " (%d steps)" % steps), file=sys.stderr)
            _child(["replay", data, name, str(steps or 0)])


def actual_path(data: str, name: str, steps: "int | None" = None) -> str:
    return os.path.join(data, "%s-actual%s.h5" % (name, "" if steps is None else "-%d" % steps))


def _replay(data: str, name: str, steps: int) -> Dict[str, Any]:
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    sys.path.insert(0, ROOT)
    import tracekit.tf2
    from tools.ports import mlp

    if name == "many":
        weights, step = mlp.make_many()
        options: Dict[str, Any] = {"variables": weights}
    else:
        model, step = mlp.make(HIDDEN[name])
        options = {"model": model}
    out = actual_path(data, name, steps or None)
    tracekit.tf2.replay(os.path.join(data, name + ".h5"), step, out=out, steps=steps or None, **options).close()
    return {"out": out}


# ---- sections, each in a child process -------------------------------------------------------

def _rss_peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _data_bytes(path: str) -> int:
    """Bytes of tensors in a trace (the raw size of what compare reads per side)."""
    import tracekit

    with tracekit.open(path) as trace:
        return sum(t.raw_bytes for t in trace.catalog)


def _compare(golden: str, actual: str) -> Dict[str, Any]:
    import tracekit

    nbytes = _data_bytes(golden)
    before = _rss_peak()
    start = time.perf_counter()
    result = tracekit.compare(golden, actual)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "bytes": nbytes, "steps": result.steps, "peak": _rss_peak() - before,
            "tensors": sum(t.steps for t in result.tensors), "result": sum(t.by_step.nbytes for t in result.tensors)}


def _chunked(path: str) -> List[str]:
    import h5py

    names: List[str] = []
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) and obj.chunks else None)
    return names


def _unshuffle(payload: bytes, itemsize: int) -> Any:
    """HDF5's unshuffle as a reader writes it with numpy: one plane at a time into a new array."""
    import numpy as np

    planes = np.frombuffer(payload, dtype=np.uint8).reshape(itemsize, -1)
    out = np.empty((planes.shape[1], itemsize), dtype=np.uint8)
    for i in range(itemsize):
        out[:, i] = planes[i]
    return out.reshape(-1)


def _decode_floor(golden: str, actual: str) -> Dict[str, Any]:
    """Every chunk of both files: raw read, zstd, unshuffle, np.array_equal; one thread."""
    import h5py
    import numpy as np
    import zstandard
    from tracekit.store import _codec

    nbytes = _data_bytes(golden)
    decompressor = zstandard.ZstdDecompressor()
    start = time.perf_counter()
    with h5py.File(golden, "r") as g, h5py.File(actual, "r") as a:
        for name in _chunked(golden):
            if name not in a:
                continue
            gd, ad = g[name], a[name]
            for offset in _codec.chunk_offsets(gd.shape, gd.chunks):
                planes = []
                for dataset in (gd, ad):
                    mask, payload = dataset.id.read_direct_chunk(offset)
                    raw = payload if mask & 2 else decompressor.decompress(payload)
                    planes.append(_unshuffle(raw, dataset.dtype.itemsize))
                np.array_equal(planes[0], planes[1])
    return {"seconds": time.perf_counter() - start, "bytes": nbytes}


def _allclose(golden: str, actual: str) -> Dict[str, Any]:
    import numpy as np
    import tracekit

    pairs = []
    with tracekit.open(golden) as g, tracekit.open(actual) as a:
        for k in range(len(g)):
            gs, as_ = g.step(k), a.step(k)
            pairs.extend((gs[key], as_[key]) for key in gs if key in as_ and isinstance(gs[key], np.ndarray)
                         and gs[key].dtype.kind == "f")
    nbytes = sum(p[0].nbytes for p in pairs)
    start = time.perf_counter()
    for x, y in pairs:
        np.allclose(x, y, atol=1e-5, rtol=1e-6)
    return {"seconds": time.perf_counter() - start, "bytes": nbytes}


def _read(golden: str) -> Dict[str, Any]:
    import tracekit

    nbytes = 0
    start = time.perf_counter()
    with tracekit.open(golden) as trace:
        for step in [trace.initial] + list(trace):
            for key in step:
                nbytes += getattr(step[key], "nbytes", 0)
    return {"seconds": time.perf_counter() - start, "bytes": nbytes}


def _read_floor(golden: str) -> Dict[str, Any]:
    import h5py
    import zstandard
    from tracekit.store import _codec

    decompressor = zstandard.ZstdDecompressor()
    nbytes = _data_bytes(golden)
    start = time.perf_counter()
    with h5py.File(golden, "r") as g:
        for name in _chunked(golden):
            dataset = g[name]
            for offset in _codec.chunk_offsets(dataset.shape, dataset.chunks):
                mask, payload = dataset.id.read_direct_chunk(offset)
                _unshuffle(payload if mask & 2 else decompressor.decompress(payload), dataset.dtype.itemsize)
    return {"seconds": time.perf_counter() - start, "bytes": nbytes}


SECTIONS = {"compare": _compare, "decode_floor": _decode_floor, "allclose": _allclose, "read": _read,
            "read_floor": _read_floor, "replay": _replay}


def _child(args: List[str], busy: bool = False) -> Dict[str, Any]:
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        proc = subprocess.run([sys.executable, __file__, "--child"] + args, stdout=subprocess.PIPE, check=True,
                              cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2"),
                              universal_newlines=True)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---- the table ----------------------------------------------------------------------------------

class Runs:
    """Repeated measurements of one figure: the best and the spread."""

    def __init__(self) -> None:
        self.values: List[float] = []

    def add(self, value: float) -> None:
        self.values.append(value)

    def best(self, higher: bool = True) -> float:
        return max(self.values) if higher else min(self.values)

    def spread(self) -> float:
        return (max(self.values) - min(self.values)) / max(min(self.values), 1e-30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.path.join(ROOT, "build", "bench", "mlp"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        section, *rest = args.child
        if section == "replay":
            print(json.dumps(_replay(rest[0], rest[1], int(rest[2]))))
        else:
            print(json.dumps(SECTIONS[section](*rest)))
        return
    os.makedirs(args.data, exist_ok=True)
    prepare(args.data)
    big, big_actual = os.path.join(args.data, "big.h5"), actual_path(args.data, "big")
    small = os.path.join(args.data, "small.h5")
    many, many_actual = os.path.join(args.data, "many.h5"), actual_path(args.data, "many")
    runs: Dict[str, Runs] = {}

    def measure(label: str, section: List[str], busy: bool = False, field: str = "rate") -> Dict[str, Any]:
        out = _child(section, busy)
        value = out["bytes"] / out["seconds"] / 1e6 if field == "rate" else out[field]
        runs.setdefault(label, Runs()).add(value)
        return out

    for rep in range(args.repeat):  # interleaved, so drift hits every section alike
        print("round %d of %d ..." % (rep + 1, args.repeat), file=sys.stderr)
        measure("compare", ["compare", big, big_actual])
        measure("decode floor", ["decode_floor", big, big_actual])
        measure("allclose", ["allclose", big, big_actual])
        measure("read", ["read", big])
        measure("read floor", ["read_floor", big])
        measure("compare, one core busy", ["compare", big, big_actual], busy=True)
        measure("decode floor, one core busy", ["decode_floor", big, big_actual], busy=True)
        for steps in MEMORY_STEPS:
            out = measure("memory %d" % steps, ["compare", small, actual_path(args.data, "small", steps)], field="peak")
            runs.setdefault("result %d" % steps, Runs()).add(out["result"])
        out = measure("many", ["compare", many, many_actual], field="seconds")
        runs.setdefault("many per step", Runs()).add(out["seconds"] / (out["steps"] + 1))
    rate = lambda label: runs[label].best()  # noqa: E731
    print("\n| measure | tracekit | floor | ratio | spread over %d runs |" % args.repeat)
    print("|---|---|---|---|---|")
    print("| compare, MB/s per side | %.0f | decode floor %.0f | %.2fx | %.0f%% / %.0f%% |" % (
        rate("compare"), rate("decode floor"), rate("compare") / rate("decode floor"),
        100 * runs["compare"].spread(), 100 * runs["decode floor"].spread()))
    print("| (np.allclose in memory, MB/s) | | %.0f | | %.0f%% |" % (rate("allclose"), 100 * runs["allclose"].spread()))
    print("| compare, one core busy, MB/s per side | %.0f | decode floor %.0f | %.2fx | %.0f%% / %.0f%% |" % (
        rate("compare, one core busy"), rate("decode floor, one core busy"),
        rate("compare, one core busy") / rate("decode floor, one core busy"),
        100 * runs["compare, one core busy"].spread(), 100 * runs["decode floor, one core busy"].spread()))
    print("| read every tensor, MB/s | %.0f | chunks + zstd + unshuffle %.0f | %.2fx | %.0f%% / %.0f%% |" % (
        rate("read"), rate("read floor"), rate("read") / rate("read floor"), 100 * runs["read"].spread(),
        100 * runs["read floor"].spread()))
    peaks = [runs["memory %d" % n].best(higher=False) / 1e6 for n in MEMORY_STEPS]
    print("| compare peak memory, %s steps, MB | %s | | %.2fx (%d vs %d steps) | |" % (
        " / ".join(map(str, MEMORY_STEPS)), " / ".join("%.0f" % p for p in peaks), peaks[-1] / peaks[0],
        MEMORY_STEPS[-1], MEMORY_STEPS[0]))
    print("| (of which the result's per-step statistics, MB) | %s | | | |" % " / ".join(
        "%.2f" % (runs["result %d" % n].best(higher=False) / 1e6) for n in MEMORY_STEPS))
    print("| compare, one step of 8,000 scalar tensors, s | %.2f | | | %.0f%% |" % (
        runs["many per step"].best(higher=False), 100 * runs["many per step"].spread()))
    print("\ntargets: compare >= 500 MB/s per side; >= 0.9x the decode floor with one core busy; memory flat "
          "within 10%%; a step of 4,000 small tensors under 1 s (%d CPUs)" % (os.cpu_count() or 0))


if __name__ == "__main__":
    main()
