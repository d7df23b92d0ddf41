"""Run a command and measure its peak memory over the whole process tree, not one process.

A judged check runs each port in a forked child, so one process's peak resident set (what
`/usr/bin/time -v` or ru_maxrss report) would leave the parent out. This samples every process
under the command every --every seconds and sums their proportional set sizes (PSS, from
/proc/PID/smaps_rollup: a page shared by n processes counts 1/n to each, so pages a fork shares
count once) and their resident sets (RSS: shared pages counted in every process, an upper bound).
Linux only.

    python tools/treemem.py [--every 0.05] [--json] -- COMMAND ...

Prints the command's exit status, wall seconds, peak PSS and peak RSS of the tree in MB, and the
most processes seen at once. Importable: measure(command) -> Measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import IO, Dict, List, Optional, Sequence


@dataclass
class Measured:
    returncode: int
    seconds: float
    peak_pss_mb: float  # the sum over the tree at its highest sample
    peak_rss_mb: float
    processes: int  # the most seen at once


def _children() -> Dict[int, List[int]]:
    """Every process's children, from /proc/*/stat (field 4: the parent)."""
    out: Dict[int, List[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2:].split()[1])
        out.setdefault(parent, []).append(int(name))
    return out


def _tree(root: int) -> List[int]:
    children, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _sizes(pid: int) -> "tuple[int, int]":
    """(PSS, RSS) in kB of one process, (0, 0) if it is gone."""
    pss = rss = 0
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss = int(line.split()[1])
    except OSError:
        pass
    return pss, rss


def measure(command: Sequence[str], every: float = 0.05, env: Optional[Dict[str, str]] = None,
            cwd: Optional[str] = None, output: Optional[IO[bytes]] = None) -> Measured:
    """Run `command` to its end, sampling its tree; `output`: a file for its stdout and stderr
    (a file, not a pipe: nobody reads a pipe while this samples)."""
    start = time.perf_counter()
    process = subprocess.Popen(list(command), env=env, cwd=cwd, stdout=output,
                               stderr=subprocess.STDOUT if output is not None else None)
    peak_pss = peak_rss = most = 0
    while process.poll() is None:
        pids = _tree(process.pid)
        sizes = [_sizes(pid) for pid in pids]
        peak_pss = max(peak_pss, sum(s[0] for s in sizes))
        peak_rss = max(peak_rss, sum(s[1] for s in sizes))
        most = max(most, len(pids))
        time.sleep(every)
    return Measured(process.returncode, time.perf_counter() - start, peak_pss / 1024.0, peak_rss / 1024.0, most)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=0.05, help="seconds between samples (default 0.05)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    found = measure(command, args.every)
    if args.json:
        print(json.dumps(asdict(found)))
    else:
        print("exit %d, %.1f s, peak PSS %.0f MB, peak RSS %.0f MB (the whole tree), %d processes at most"
              % (found.returncode, found.seconds, found.peak_pss_mb, found.peak_rss_mb, found.processes),
              file=sys.stderr)
    return found.returncode


if __name__ == "__main__":
    sys.exit(main())
