"""Where the test suite's time goes: a pytest plugin that logs each test phase's duration as it is
reported, and a summary by file and by folder.

    TRACEKIT_CENSUS=/tmp/census.tsv tools/test          # tools/test loads the plugin when it is set
    python -m tools.census /tmp/census.tsv [N]      # the N costliest files, and each folder

Each line is: interpreter, test id, phase (setup, call, teardown), seconds, outcome. Under xdist
only the controller writes (the workers' reports reach it), so each phase is logged once; the
modern and the legacy runs append to the same file, told apart by the interpreter.
Python 3.7 syntax: the legacy run loads it too.
"""

from __future__ import annotations

import collections
import os
import sys
from typing import Dict, List, Tuple

_WHO = "py%d.%d" % sys.version_info[:2]


_path = None  # where this process logs: the controller's, not an xdist worker's


def pytest_configure(config):  # noqa: D103 (a pytest hook)
    global _path
    _path = None if hasattr(config, "workerinput") else os.environ.get("TRACEKIT_CENSUS")


def pytest_runtest_logreport(report):  # noqa: D103 (a pytest hook)
    if _path:
        with open(_path, "a") as out:
            out.write("%s\t%s\t%s\t%.3f\t%s\n" % (_WHO, report.nodeid, report.when, report.duration, report.outcome))


def summary(lines: List[str], top: int = 30) -> str:
    """The census as text: per interpreter, the worker-seconds in all, the `top` costliest files
    (their share, their tests, what their fixtures' setup and teardown took) and each folder."""
    rows: Dict[str, Dict[Tuple[str, str], float]] = collections.defaultdict(dict)
    for line in lines:
        fields = line.rstrip("\n").split("\t")
        if len(fields) == 5:
            rows[fields[0]][(fields[1], fields[2])] = float(fields[3])
    out = []
    for who in sorted(rows):
        files = collections.Counter()  # type: collections.Counter
        fixtures = collections.Counter()  # type: collections.Counter
        tests = collections.Counter()  # type: collections.Counter
        for (node, phase), seconds in rows[who].items():
            name = node.split("::")[0]
            files[name] += seconds
            if phase == "call":
                tests[name] += 1
            else:
                fixtures[name] += seconds
        total = sum(files.values()) or 1.0
        out.append("%s: %.0f worker-seconds, %d tests" % (who, total, sum(tests.values())))
        for name, seconds in files.most_common(top):
            out.append("  %7.0f s %5.1f%% %5d tests (setup and teardown %5.0f s)  %s"
                       % (seconds, 100 * seconds / total, tests[name], fixtures[name], name))
        folders = collections.Counter()  # type: collections.Counter
        for name, seconds in files.items():
            folders["/".join(name.split("/")[:2])] += seconds
        out.append("  by folder:")
        out.extend("  %7.0f s %5.1f%%  %s" % (s, 100 * s / total, f) for f, s in folders.most_common())
    return "\n".join(out)


def main(argv: List[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    with open(argv[0]) as census:
        print(summary(census.readlines(), int(argv[1]) if len(argv) > 1 else 30))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
