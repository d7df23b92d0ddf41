"""Damage-and-fuzz campaign: how tracekit's store takes damaged and hostile golden files.

Cases (each depends only on --seed and its id, so any one can be rebuilt alone):

  d<N>  damage: a copy of a golden with one 4 KiB block zeroed, 16-256 bytes overwritten, one
        bit flipped (anywhere, in /meta, or in a step's `index`/`info` attribute), or the
        file truncated
  f<N>  fuzz: the smallest golden, or the same rewritten by tracekit's writer with a few
        extra values (a structure, strings, a chunked array), edited with h5py to
        declare absurd things (vlen and reference dtypes, 1e12-element shapes, 200k-field
        structures, huge step indexes, steps = 1e9, format 999, hostile /meta, links that
        loop, random bytes, ...), mixed with random attribute mutations
  c<N>  control: an undamaged golden, which must come back `intact` (checks the harness)

Every case runs in two fresh processes, so an HDF5 crash is seen as a signal: the real CLI
(`python -m tracekit verify FILE`, which calls the Python API's tracekit.verify in its own
process) and a reader (this script, --child-read) that opens the file with tracekit.open and
fingerprints the header, meta, every step's info, key list and value, in its own process as
a user's code does. The parent compares the fingerprints with the undamaged golden's, read
once in-process. Each child runs under an
RLIMIT_AS of --mem-limit-mb; wait4 gives its peak RSS and CPU time (its own and its
waited-for children's: the CLI and the API fork to read). The table also gives a bare
`python -c "import tracekit"`'s, the floor of both.

Time and memory are judged against a calibration measured in the same run, not in seconds:
each child is also run on every undamaged file a case is made from, and a case is slow when
a child takes over --slow-factor times the CPU time of the same child on its undamaged
file, a hang (timeout) past --timeout-factor times its wall time (never under
--timeout-floor-s), and a memory bug past --rss-extra-mb over its peak RSS. Machines differ
in speed by several times; a ratio of 8 to the same work on the same machine does not.

Bugs: crash (verify died of a signal: tracekit.verify crashed its caller's process),
api-crash (the reader died of a signal: tracekit.open or a read crashed the caller's process), timeout, memory (MemoryError or an allocation failure
anywhere in the output, or the peak RSS above), raw (a Python traceback, or an exit code
other than 0/1/2), verbose (a message line over 4 KiB), slow, silent (a read returned a
value that differs from the golden's and nothing reported damage), reported-but-wrong-read
(verify reported damage but a read still returned a wrong value), verify-missed (verify
said ok while a read raised). Fine: reported, intact (the damage hit unused bytes), accepted
(a fuzz file that verify and reads accept). Counted apart, the documented limit
(docs/ROBUSTNESS.md): unprotected (damage to the metadata of a golden of the earlier layout,
which predates the metadata checksums, read wrong).

The goldens are the shipped ones (goldens/) unless --goldens names another directory (e.g.
tests/data/foreign_cpu, goldens of the earlier layout); hostile files come from
tools/store_fuzz.py.

    .venv/bin/python tools/store_campaign.py [--seed 0] [--cases 300] [--fuzz 500] [--jobs 2]
        [--goldens DIR] [--json cases.json] [--keep DIR] [--only d17,f42]

Exits 1 if any case is a bug, else 0. Each bug is printed with the command that reruns it.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from tools.store_fuzz import GOLDENS_DIR, Base, build_fuzz, goldens_in, make_bases  # noqa: E402
BUGS = ("crash", "api-crash", "timeout", "memory", "raw", "verbose", "slow", "silent", "reported-but-wrong-read",
        "verify-missed")
# unprotected: damage to the metadata of a golden written before it had a checksum, read wrong:
# the documented limit of old goldens (docs/ROBUSTNESS.md), counted apart from the bugs.
FINE = ("reported", "intact", "accepted", "skipped", "unprotected")
TRACEBACK = "Traceback (most recent call last)"
MEMORY_RE = re.compile(r"MemoryError|Unable to allocate|memory allocation failed|std::bad_alloc|"
                       r"Cannot allocate memory|out of memory", re.IGNORECASE)


@dataclass
class Limits:
    """What is a bug, relative to the same child on the undamaged file (its calibration, measured
    in the same run): seconds differ between machines several times over, ratios do not."""

    slow_factor: float = 8.0  # CPU time over this many times the calibration's (a read is ~2x its floor)
    timeout_factor: float = 30.0  # wall time over this many times the calibration's is a hang
    timeout_floor_s: float = 30.0  # ... but never under this: a busy machine's calibration may be quick
    rss_extra_mb: float = 200.0  # peak RSS this much over the calibration's
    mem_limit_mb: int = 2048  # RLIMIT_AS: a huge allocation fails instead of swapping the machine
    line_chars: int = 4096

    def timeout_s(self, calibration: Optional["ChildResult"]) -> float:
        return max(self.timeout_floor_s, self.timeout_factor * calibration.wall_s if calibration else 0.0)


# ---- fingerprints: what the reader child prints and the parent compares ------------------------

def _canon(value: Any) -> Any:
    """A repr-able form that differs whenever the value does, bit for bit (NaN payloads too)."""
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return ("ndo", value.shape, [_canon(v) for v in value.reshape(-1).tolist()])
        digest = hashlib.blake2b(np.ascontiguousarray(value).tobytes(), digest_size=16).hexdigest()
        return ("nd", str(value.dtype), value.dtype.str, value.shape, digest)
    if isinstance(value, np.generic):
        return ("np", str(value.dtype), value.dtype.str, value.tobytes().hex())
    if isinstance(value, dict):
        return ("dict", [(_canon(k), _canon(v)) for k, v in value.items()])
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return ("namedtuple", type(value).__name__, value._fields, [_canon(v) for v in value])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_canon(v) for v in value])
    if isinstance(value, float):
        return ("float", value.hex())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, _canon(dataclasses.asdict(value)))
    return (type(value).__name__, repr(value))


def fingerprint(value: Any) -> str:
    try:
        return hashlib.blake2b(repr(_canon(value)).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    except RecursionError:  # our own limit, not tracekit's: still a value that was read
        return "too-deep:%s" % type(value).__name__


def walk_trace(path: str, item: Callable[[str, str], None], error: Callable[[str, Exception], None],
               unexpected: Callable[[str, BaseException], None]) -> None:
    """Read everything a user could: header, meta, each step's info, keys and values."""
    import tracekit

    missing = object()

    def guard(key: str, read: Callable[..., Any], *args: Any) -> Any:
        try:
            value = read(*args)
        except tracekit.TracekitError as exc:
            error(key, exc)
            return missing
        except Exception as exc:  # noqa: BLE001  # anything else is a raw exception: the finding
            unexpected(key, exc)
            return missing
        item(key, fingerprint(value))
        return value

    trace = guard("open", lambda: tracekit.open(path))
    if trace is missing:
        return
    try:
        guard("header", lambda: (len(trace), trace.has_initial, trace.complete, trace.format_version,
                                 trace.producer, trace.created, trace.recovered, trace.catalog))
        guard("meta", lambda: trace.meta)
        has_initial = guard("has_initial", lambda: trace.has_initial)
        count = guard("len", lambda: len(trace))
        indices = ([-1] if has_initial is True else []) + list(range(count if isinstance(count, int) else 0))
        for s in indices:
            step = trace.initial if s == -1 else trace.step(s)
            guard("info/%d" % s, getattr, step, "info")
            keys = guard("keys/%d" % s, list, step)
            for key in keys if isinstance(keys, list) else ():
                guard("value/%d/%s" % (s, key), step.__getitem__, key)
    finally:
        guard("close", trace.close)


def read_original(path: str) -> Dict[str, str]:
    """The undamaged golden's fingerprints, read in this process; any problem is fatal."""
    items: Dict[str, str] = {}

    def fail(key: str, exc: BaseException) -> None:
        raise RuntimeError("%s: %s cannot be read undamaged: %r" % (path, key, exc))
    walk_trace(path, items.__setitem__, fail, fail)
    return items


def _child_read(path: str) -> int:
    """The reader child: one JSON line per item read or error. Exit 0 clean, 1 a TracekitError
    was raised, 3 something else was (its traceback is on stderr)."""
    sys.modules["tensorflow"] = None  # type: ignore[assignment]  # reading must never load it
    state = {"error": False, "raw": False}

    def item(key: str, digest: str) -> None:
        print(json.dumps({"k": key, "d": digest}))

    def error(key: str, exc: Exception) -> None:
        state["error"] = True
        message = str(exc)
        print(json.dumps({"e": key, "m": message[:300], "n": max(map(len, message.splitlines() or [""]))}))

    def unexpected(key: str, exc: BaseException) -> None:
        state["raw"] = True
        traceback.print_exception(type(exc), exc, exc.__traceback__)
        print(json.dumps({"x": key, "m": ("%s: %s" % (type(exc).__name__, exc))[:300]}))

    walk_trace(path, item, error, unexpected)
    sys.stdout.flush()
    return 3 if state["raw"] else 1 if state["error"] else 0


# ---- children: spawned from this thread only, reaped with wait4 for their rusage ---------------

@dataclass
class ChildResult:
    role: str
    returncode: int
    timed_out: bool = False
    wall_s: float = 0.0
    cpu_s: float = 0.0
    maxrss_mb: float = 0.0
    stdout: str = ""
    stderr: str = ""
    max_line: int = 0  # the longest output line, in characters

    @property
    def signal(self) -> Optional[int]:
        return -self.returncode if self.returncode < 0 and not self.timed_out else None

    def record(self) -> Dict[str, Any]:
        out = dataclasses.asdict(self)
        out["stdout"], out["stderr"] = self.stdout[-2000:], self.stderr[-4000:]
        return out


@dataclass
class Task:
    key: Any
    role: str
    argv: List[str]
    timeout_s: float = 120.0  # wall seconds before the child is interrupted, then killed


# Each child is started by this small launcher (`python -S`: stdlib only): it forks and execs the
# child under the limits and writes the child's wait4 rusage to a file. Why not spawn it from here:
# Linux counts the pages a forked child shares with its parent in the child's ru_maxrss (fork copies
# them, exec keeps the old high-water mark), so a child of this process, grown by reading the
# goldens, would report this process's RSS as its floor. The launcher's floor is a few MB.
LAUNCHER = """
import json, os, resource, signal, sys, time
report, mem, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a timeout's SIGINT is for the child: report it
start = time.monotonic()
pid = os.fork()
if pid == 0:
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash must not leave a core file behind
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
with open(report, "w") as fh:
    json.dump({"status": status, "wall": time.monotonic() - start, "cpu": ru.ru_utime + ru.ru_stime,
               "maxrss": ru.ru_maxrss}, fh)
"""


CHILD_ENV = dict(os.environ, PYTHONFAULTHANDLER="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                 TF_CPP_MIN_LOG_LEVEL="2")
OUTPUT_CAP = 8 << 20


def _collect(path: str) -> Tuple[str, int]:
    with open(path, "rb") as fh:
        data = fh.read(OUTPUT_CAP + 1)
    os.remove(path)
    longest = max((len(line) for line in data.splitlines()), default=0)
    if len(data) > OUTPUT_CAP:
        longest = max(longest, len(data))
    return data.decode("utf-8", "replace"), longest


def run_tasks(tasks: Iterable[Task], jobs: int, limits: Limits, workdir: str) -> Iterator[Tuple[Task, ChildResult]]:
    """Run tasks `jobs` at a time, pulling the next one (which may build its file) only when a
    slot is free; yields each as it ends. A child over its task's timeout gets SIGINT (a Python
    traceback says where it was), then SIGKILL 3 s later: sent to its process group (the
    launcher, the child, and what the child forked)."""
    pending, running = iter(tasks), {}
    exhausted, serial = False, 0
    try:
        while True:
            while not exhausted and len(running) < jobs:
                task = next(pending, None)
                if task is None:
                    exhausted = True
                    break
                serial += 1
                out, err, report = (os.path.join(workdir, "%d.%s" % (serial, s)) for s in ("out", "err", "json"))
                argv = [sys.executable, "-S", "-c", LAUNCHER, report, str(limits.mem_limit_mb << 20)] + task.argv
                with open(out, "wb") as fo, open(err, "wb") as fe:
                    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, cwd=ROOT,
                                            env=CHILD_ENV, start_new_session=True)
                running[proc.pid] = [task, proc, time.monotonic(), out, err, report, False]
            if not running:
                return
            reaped = False
            for pid, entry in list(running.items()):
                task, proc, start, out, err, report, timed_out = entry
                got, status, usage = os.wait4(pid, os.WNOHANG)
                now = time.monotonic()
                if not got:
                    if now - start > task.timeout_s + 3:
                        os.killpg(pid, signal.SIGKILL)
                    elif now - start > task.timeout_s and not timed_out:
                        entry[6] = True
                        os.killpg(pid, signal.SIGINT)
                    continue
                proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait for it again
                del running[pid]
                reaped = True
                (stdout, lo), (stderr, le) = _collect(out), _collect(err)
                try:
                    with open(report) as fh:
                        rep = json.load(fh)
                    os.remove(report)
                except (OSError, ValueError):  # the launcher was killed (a timeout): its own figures
                    rep = {"status": status, "wall": now - start, "cpu": usage.ru_utime + usage.ru_stime,
                           "maxrss": usage.ru_maxrss}
                yield task, ChildResult(task.role, os.waitstatus_to_exitcode(rep["status"]), timed_out,
                                        round(rep["wall"], 3), round(rep["cpu"], 3), round(rep["maxrss"] / 1024, 1),
                                        stdout, stderr, max(lo, le))
            if not reaped:
                time.sleep(0.005)
    finally:
        for pid in running:  # interrupted: end the children this function started
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def run_child(argv: List[str], limits: Optional[Limits] = None, role: str = "child",
              timeout_s: Optional[float] = None) -> ChildResult:
    limits = limits or Limits()
    task = Task(None, role, argv, limits.timeout_floor_s if timeout_s is None else timeout_s)
    with tempfile.TemporaryDirectory() as work:
        return next(run_tasks([task], 1, limits, work))[1]


def verify_argv(path: str) -> List[str]:
    return [sys.executable, "-m", "tracekit", "verify", path]


def read_argv(path: str) -> List[str]:
    return [sys.executable, "-m", "tools.store_campaign", "--child-read", path]


# ---- classification ------------------------------------------------------------------------------

@dataclass
class ReadLog:
    items: Dict[str, str] = field(default_factory=dict)
    errors: List[Tuple[str, str]] = field(default_factory=list)
    unexpected: List[Tuple[str, str]] = field(default_factory=list)
    longest: int = 0


def parse_read(stdout: str) -> ReadLog:
    log = ReadLog()
    for line in stdout.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if "k" in rec:
            log.items[rec["k"]] = rec["d"]
        elif "e" in rec:
            log.errors.append((rec["e"], rec["m"]))
            log.longest = max(log.longest, rec.get("n", 0))
        elif "x" in rec:
            log.unexpected.append((rec["x"], rec["m"]))
    return log


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _where(text: str) -> str:
    """The innermost tracekit frame of a traceback (or of faulthandler's dump, innermost first)."""
    frames = re.findall(r'File "[^"]*?((?:tracekit|h5py)/[^"]+)", line (\d+),? in (\S+)', text)
    if not frames:
        return ""
    tk = [f for f in frames if f[0].startswith("tracekit/")] or frames
    frame = tk[0] if "most recent call first" in text else tk[-1]
    return "%s:%s in %s" % frame


def _problem_line(child: ChildResult) -> str:
    lines = [line.strip() for line in child.stdout.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("DAMAGED") and "problem" in lines[0]:
        return lines[1][:300]
    return (lines[0][:300] if lines else "") or _last_line(child.stderr)


def has_meta_crc(path: str) -> bool:
    """Was the golden written with its metadata checksum (goldens of the earlier layout predate it)?"""
    import h5py

    with h5py.File(path, "r") as f:
        return "crc32" in f["meta"].attrs


# What a golden written before the metadata checksums cannot protect: its metadata (and the
# catalog in it, which the header fingerprint holds, and which orders each step's keys) and
# the step info blobs.
UNPROTECTED = re.compile(r"^(header|meta|info/-?\d+|keys/-?\d+)$")


def classify(kind: str, verify: ChildResult, read: ChildResult, original: Optional[Dict[str, str]],
             limits: Limits, calibration: Dict[str, ChildResult], old_format: bool = False) -> Tuple[str, str]:
    """(outcome, detail) of one case from its two children; `original` is None for fuzz cases.
    `calibration`: the same two children ("verify", "read") on the undamaged file the case was
    made from, which time and memory are judged against. `old_format`: the golden predates the
    metadata checksums, so a wrong value read from its metadata is its known limit
    ("unprotected"), not a bug. The reader child reads through the Python API in its own
    process: a signal there is "api-crash", a crash of the caller's process."""
    children = (verify, read)
    for c in children:
        if c.signal:
            name = signal.Signals(c.signal).name if c.signal in signal.Signals._value2member_map_ else c.signal
            also = "" if c is verify else "; verify: %.150s" % _problem_line(verify)
            return "api-crash" if c is read else "crash", "%s: %s at %s%s" % (
                c.role, name, _where(c.stderr) or _last_line(c.stderr), also)
    for c in children:
        if c.timed_out:
            return "timeout", "%s: over %.0f s, %gx its %.2f s on the undamaged file (%s) %s" % (
                c.role, limits.timeout_s(calibration[c.role]), limits.timeout_factor, calibration[c.role].wall_s,
                _where(c.stderr), _last_line(c.stderr))
    for c in children:
        found = MEMORY_RE.search(c.stdout + c.stderr)
        allowed = calibration[c.role].maxrss_mb + limits.rss_extra_mb
        if found or c.maxrss_mb > allowed:
            text = c.stdout + "\n" + c.stderr
            line = next((ln for ln in text.splitlines() if MEMORY_RE.search(ln)), "") if found else ""
            where = _where(c.stderr)
            return "memory", "%s: peak RSS %.0f MB (%.0f on the undamaged file)%s%s%s" % (
                c.role, c.maxrss_mb, calibration[c.role].maxrss_mb, ", raw traceback" if TRACEBACK in c.stderr else "",
                " at " + where if where else "", ": " + line.strip()[:300] if line else "")
    for c in children:
        if TRACEBACK in c.stderr or c.returncode not in (0, 1, 2):
            return "raw", "%s: exit %d at %s: %s" % (c.role, c.returncode, _where(c.stderr), _last_line(c.stderr))
    log = parse_read(read.stdout)
    longest = max([log.longest, verify.max_line] + [len(line) for line in (verify.stdout + verify.stderr).splitlines()])
    if longest > limits.line_chars:
        return "verbose", "a message line of %d characters: %.200s..." % (longest, max(
            (verify.stdout + verify.stderr).splitlines() + [m for _, m in log.errors], key=len))
    for c in children:
        floor = calibration[c.role].cpu_s
        if c.cpu_s > limits.slow_factor * floor:
            return "slow", "%s: %.1f s CPU, %.1fx its %.2f s on the undamaged file (%.1f s wall)" % (
                c.role, c.cpu_s, c.cpu_s / floor, floor, c.wall_s)
    if original is not None:
        wrong = [k for k, d in log.items.items() if k not in ("open", "close") and original.get(k) != d]
        if read.returncode == 0:  # nothing raised, so anything not read went missing silently
            wrong += [k for k in original if k not in log.items]
        if wrong:
            detail = "%s differs (%d items)" % (wrong[0], len(wrong))
            if old_format and all(UNPROTECTED.match(k) for k in wrong):
                return "unprotected", detail + "; verify: %s" % _problem_line(verify)
            if verify.returncode == 0 and read.returncode == 0:
                return "silent", detail
            return "reported-but-wrong-read", "%s; verify: %s" % (detail, _problem_line(verify))
    if verify.returncode == 0 and read.returncode != 0:
        return "verify-missed", "verify ok, read: %s" % ((log.errors or [("", "")])[0][1])
    if verify.returncode in (1, 2):
        return "reported", _problem_line(verify)
    return ("accepted" if original is None else "intact"), ""


# ---- damage --------------------------------------------------------------------------------------

def _flip(path: str, at: int, bit: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(at)
        byte = fh.read(1)[0]
        fh.seek(at)
        fh.write(bytes([byte ^ (1 << bit)]))


def damage(path: str, rng: random.Random) -> str:
    """Damage the file one way; returns the label."""
    import h5py

    size = os.path.getsize(path)
    how = rng.choice(["zero4k", "overwrite", "flip", "meta-flip", "attr-flip", "truncate"])
    if how == "meta-flip":
        with h5py.File(path, "r") as f:
            start, length = f["meta"].id.get_offset(), f["meta"].id.get_storage_size()
        at, bit = start + rng.randrange(length), rng.randrange(8)
        _flip(path, at, bit)
        return "meta-flip@%d:%d" % (at, bit)
    if how == "attr-flip":
        with h5py.File(path, "r") as f:
            # format 2 keeps a step's index and info in its block (damaged by a "flip"); /initial its own
            groups = (["initial"] if "initial" in f else []) + ["steps/" + s for s in f.get("steps", [])]
            group = rng.choice(groups) if groups else None
            names = [a for a in ("index", "info") if group is not None and a in f[group].attrs]  # the earlier layout has no index
            name = rng.choice(names) if names else None
            raw = bytes(f[group].attrs[name].tobytes()) if name else b""
        with open(path, "rb") as fh:
            start = fh.read().find(raw) if raw else -1
        if start >= 0:
            at, bit = start + rng.randrange(len(raw)), rng.randrange(8)
            _flip(path, at, bit)
            return "%s-flip@%d:%d(%s)" % (name, at, bit, group)
        how = "flip"
    if how == "zero4k":
        at = rng.randrange(-(-size // 4096)) * 4096
        with open(path, "r+b") as fh:
            fh.seek(at)
            fh.write(bytes(min(4096, size - at)))
        return "zero4k@%d" % at
    if how == "overwrite":
        count = rng.randint(16, 256)
        at = rng.randrange(max(1, size - count))
        with open(path, "r+b") as fh:
            fh.seek(at)
            fh.write(rng.randbytes(count))
        return "overwrite@%d+%d" % (at, count)
    if how == "flip":
        at, bit = rng.randrange(size), rng.randrange(8)
        _flip(path, at, bit)
        return "flip@%d:%d" % (at, bit)
    cut = rng.randrange(size)
    os.truncate(path, cut)
    return "truncate@%d" % cut


# ---- the campaign --------------------------------------------------------------------------------

KINDS = {"c": "control", "d": "damage", "f": "fuzz"}


@dataclass
class Case:
    id: str  # c<N>, d<N>, f<N>: with the seed, all it takes to rebuild the case
    kind: str
    label: str = ""
    golden: str = ""  # the golden it was made from, relative to the repository
    source: str = ""  # that golden's path here
    outcome: str = ""
    detail: str = ""
    path: str = ""
    verify: Optional[ChildResult] = None
    read: Optional[ChildResult] = None

    def record(self) -> Dict[str, Any]:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("path", "source", "verify", "read")}
        out.update(verify=self.verify and self.verify.record(), read=self.read and self.read.record())
        return out


def plan(goldens: List[str], cases: int, fuzz: int, controls: bool = True,
         only: Optional[List[str]] = None) -> List[Case]:
    ids = only or ((["c%d" % i for i in range(len(goldens))] if controls else [])
                   + ["d%d" % i for i in range(cases)] + ["f%d" % i for i in range(fuzz)])
    return [Case(i, KINDS[i[0]]) for i in ids]


def _golden_for(case: Case, rng: random.Random, goldens: List[str]) -> str:
    """The golden a damage or control case copies: its rng's first draw."""
    return goldens[int(case.id[1:]) % len(goldens)] if case.kind == "control" else rng.choice(goldens)


def sources_of(todo: List[Case], seed: int, goldens: List[str], bases: Dict[str, Base]) -> List[str]:
    """The undamaged files the cases are made from (each is calibrated once): the goldens the
    damage and control cases copy, and every base when there is a fuzz case."""
    picked = {_golden_for(c, random.Random("%d:%s" % (seed, c.id)), goldens) for c in todo if c.kind != "fuzz"}
    return [g for g in goldens if g in picked] + [b.path for b in bases.values()]


def prepare(case: Case, seed: int, workdir: str, goldens: List[str], bases: Dict[str, Base]) -> None:
    """Build the case's file from the seed, its id and the goldens alone."""
    rng = random.Random("%d:%s" % (seed, case.id))
    case.path = os.path.join(workdir, case.id + ".h5")
    if case.kind == "fuzz":
        try:
            case.label, golden = build_fuzz(case.path, int(case.id[1:]), rng, bases)
        except RuntimeError as exc:
            case.outcome, case.label, golden = "skipped", str(exc).split(":")[0], bases["golden"].path
            case.detail = str(exc)[:300]
    else:
        golden = _golden_for(case, rng, goldens)
        shutil.copyfile(golden, case.path)
        case.label = "undamaged" if case.kind == "control" else damage(case.path, rng)
    case.source = golden
    case.golden = os.path.relpath(golden, ROOT) if golden.startswith(ROOT) else os.path.basename(golden)


@dataclass
class Campaign:
    seed: int
    goldens_dir: str
    cases: List[Case]
    baseline: ChildResult  # a bare `python -c "import tracekit"`: the floor of every child's RSS and time
    wall_s: float = 0.0
    limits: Limits = field(default_factory=Limits)
    # each undamaged file a case was made from -> its children ("verify", "read"): what cases are judged against
    calibration: Dict[str, Dict[str, ChildResult]] = field(default_factory=dict)

    @property
    def bugs(self) -> List[Case]:
        return [c for c in self.cases if is_bug(c)]


def is_bug(case: Case) -> bool:
    """A bug outcome, or a control that did not come back intact (the harness or tracekit is wrong)."""
    return case.outcome in BUGS or (case.kind == "control" and case.outcome not in ("", "intact"))


def run_campaign(seed: int = 0, cases: int = 300, fuzz: int = 500, jobs: int = 2, limits: Optional[Limits] = None,
                 only: Optional[List[str]] = None, keep: Optional[str] = None, controls: bool = True,
                 goldens_dir: str = GOLDENS_DIR, log: Any = sys.stderr) -> Campaign:
    limits = limits or Limits()
    goldens = goldens_in(goldens_dir)
    if not goldens:
        raise SystemExit("store_campaign: no goldens (*.h5) in %s" % goldens_dir)
    start = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="store_campaign-")
    todo = plan(goldens, cases, fuzz, controls, only)
    campaign = Campaign(seed, goldens_dir, todo, run_child([sys.executable, "-c", "import tracekit"], limits, "baseline"),
                        limits=limits)
    originals: Dict[str, Dict[str, str]] = {}
    try:
        bases = make_bases(workdir, goldens) if any(c.kind == "fuzz" for c in todo) else {}
        campaign.calibration = calibrate(sources_of(todo, seed, goldens, bases), jobs, limits, workdir)

        def tasks() -> Iterator[Task]:
            for case in todo:
                prepare(case, seed, workdir, goldens, bases)
                if case.outcome == "skipped":
                    continue
                if case.kind != "fuzz" and case.golden not in originals:
                    originals[case.golden] = read_original(case.source)
                measured = campaign.calibration[case.source]
                yield Task(case, "verify", verify_argv(case.path), limits.timeout_s(measured["verify"]))
                yield Task(case, "read", read_argv(case.path), limits.timeout_s(measured["read"]))

        done = 0
        for task, result in run_tasks(tasks(), jobs, limits, workdir):
            case = task.key
            setattr(case, task.role, result)
            if case.verify is None or case.read is None:
                continue
            case.outcome, case.detail = classify(case.kind, case.verify, case.read,
                                                 None if case.kind == "fuzz" else originals[case.golden], limits,
                                                 campaign.calibration[case.source],
                                                 old_format=case.kind != "fuzz" and not has_meta_crc(case.source))
            case.read.stdout = case.read.stdout[-2000:]  # the fingerprints are spent: keep memory flat
            case.detail = case.detail.replace(case.path, "FILE")
            done += 1
            if is_bug(case):
                print("BUG %s %s %s %s: %s" % (case.id, case.outcome, case.golden, case.label, case.detail), file=log)
                if keep:
                    os.makedirs(keep, exist_ok=True)
                    shutil.copyfile(case.path, os.path.join(keep, "%s-%s.h5" % (case.id, case.outcome)))
            if done % 25 == 0:
                print("[%d/%d cases] %s" % (done, len(todo), _counts(todo)), file=log, flush=True)
            os.remove(case.path)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    campaign.wall_s = round(time.monotonic() - start, 1)
    return campaign


def calibrate(paths: List[str], jobs: int, limits: Limits, workdir: str) -> Dict[str, Dict[str, ChildResult]]:
    """Both children on each undamaged file a case can be made from: the time and memory its
    damaged copies are judged against. An undamaged file must verify and read cleanly, or the
    harness is wrong."""
    tasks = [Task(path, role, argv, 4 * limits.timeout_floor_s) for path in paths
             for role, argv in (("verify", verify_argv(path)), ("read", read_argv(path)))]
    measured: Dict[str, Dict[str, ChildResult]] = {}
    for task, child in run_tasks(tasks, jobs, limits, workdir):
        if child.returncode != 0 or child.timed_out:
            raise RuntimeError("store_campaign: the undamaged %s does not %s cleanly (exit %d): %s"
                               % (task.key, task.role, child.returncode, _last_line(child.stderr + child.stdout)))
        measured.setdefault(task.key, {})[task.role] = child
    return measured


def _counts(cases: Iterable[Case]) -> str:
    counts = collections.Counter(c.outcome for c in cases if c.outcome)
    return " ".join("%s=%d" % kv for kv in sorted(counts.items()))


def _stat(values: List[float]) -> str:
    return "median %.2f, max %.2f" % (float(np.median(values)), max(values)) if values else "-"


def report(campaign: Campaign, command: str = "tools/store_campaign.py") -> str:
    lines = ["store campaign, seed %d, goldens in %s: %d cases in %.0f s" % (
        campaign.seed, os.path.relpath(campaign.goldens_dir, ROOT), len(campaign.cases), campaign.wall_s), ""]
    outcomes = list(BUGS) + list(FINE)
    kinds = [k for k in ("control", "damage", "fuzz") if any(c.kind == k for c in campaign.cases)]
    lines.append("%-31s" % "outcome" + "".join("%9s" % k for k in kinds))
    for outcome in outcomes:
        counts = [sum(c.outcome == outcome and c.kind == k for c in campaign.cases) for k in kinds]
        if any(counts):
            name = outcome + (" (bug)" if outcome in BUGS else "")
            lines.append("%-31s" % name + "".join("%9d" % n for n in counts))
    base = campaign.baseline
    lines += ["", "baseline `import tracekit`: peak RSS %.0f MB, %.2f s wall, %.2f s CPU" % (
        base.maxrss_mb, base.wall_s, base.cpu_s)]
    for role in ("verify", "read"):
        runs = [getattr(c, role) for c in campaign.cases if getattr(c, role) is not None]
        if runs:
            lines.append("%-6s peak RSS MB %s; wall s %s; CPU s %s" % (
                role, _stat([r.maxrss_mb for r in runs]), _stat([r.wall_s for r in runs]),
                _stat([r.cpu_s for r in runs])))
        floors = [m[role] for m in campaign.calibration.values()]
        ratios = [getattr(c, role).cpu_s / campaign.calibration[c.source][role].cpu_s for c in campaign.cases
                  if getattr(c, role) is not None and c.source in campaign.calibration]
        if floors:
            lines.append("       on the %d undamaged files: CPU s %s; damaged/undamaged CPU %s (slow past %gx)" % (
                len(floors), _stat([r.cpu_s for r in floors]), _stat(ratios), campaign.limits.slow_factor))
    bugs = campaign.bugs
    lines += ["", "%d bug case%s" % (len(bugs), "" if len(bugs) == 1 else "s") + (":" if bugs else "")]
    goldens_arg = "" if campaign.goldens_dir == GOLDENS_DIR else " --goldens " + os.path.relpath(campaign.goldens_dir)
    for c in bugs:
        lines.append("  %-5s %-24s %-22s %s\n        %s\n        rerun: %s --seed %d --only %s --keep DIR"
                     % (c.id, c.outcome, os.path.basename(c.golden), c.label, c.detail, command + goldens_arg, campaign.seed, c.id))
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child-read"]:
        return _child_read(argv[1])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0, help="seed of every case (default 0)")
    parser.add_argument("--cases", type=int, default=300, help="damage cases d0..d{N-1} (default 300)")
    parser.add_argument("--fuzz", type=int, default=500, help="hostile files f0..f{N-1} (default 500)")
    parser.add_argument("--goldens", metavar="DIR", default=GOLDENS_DIR,
                        help="the goldens to damage and fuzz (default: the shipped ones, goldens/)")
    parser.add_argument("--no-controls", action="store_true", help="skip the undamaged control cases, one per golden")
    parser.add_argument("--only", metavar="IDS", help="run only these cases, e.g. d17,f42 (ids the table prints)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="children run at once (default: 2, or 1 on one core)")
    parser.add_argument("--slow-factor", type=float, default=8.0,
                        help="a child is slow past this many times its CPU time on the undamaged file (default 8)")
    parser.add_argument("--timeout-factor", type=float, default=30.0,
                        help="a child hangs past this many times its wall time on the undamaged file (default 30)")
    parser.add_argument("--timeout-floor-s", type=float, default=30.0,
                        help="... but never under this many seconds (default 30)")
    parser.add_argument("--rss-extra-mb", type=float, default=200.0,
                        help="peak RSS this much over the undamaged file's is a memory bug (default 200)")
    parser.add_argument("--mem-limit-mb", type=int, default=2048, help="each child's RLIMIT_AS (default 2048)")
    parser.add_argument("--json", metavar="PATH", help="write every case record (both children's exit, times, "
                                                       "RSS, output tails) to PATH")
    parser.add_argument("--keep", metavar="DIR", help="copy the file of every bug case to DIR/<id>-<outcome>.h5")
    args = parser.parse_args(argv)
    limits = Limits(slow_factor=args.slow_factor, timeout_factor=args.timeout_factor,
                    timeout_floor_s=args.timeout_floor_s, rss_extra_mb=args.rss_extra_mb, mem_limit_mb=args.mem_limit_mb)
    campaign = run_campaign(args.seed, args.cases, args.fuzz, args.jobs, limits,
                            args.only.split(",") if args.only else None, args.keep, not args.no_controls,
                            args.goldens)
    print(report(campaign))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"seed": args.seed, "wall_s": campaign.wall_s, "baseline": campaign.baseline.record(),
                       "calibration": {os.path.relpath(path, ROOT): {role: child.record() for role, child in m.items()}
                                       for path, m in campaign.calibration.items()},
                       "cases": [c.record() for c in campaign.cases]}, fh, indent=1)
    return 1 if campaign.bugs else 0


if __name__ == "__main__":
    sys.exit(main())
