"""tools/treemem.py, which the benchmarks measure memory with: a peak over the whole process
tree, where a judged check's forked children hold the ports."""

from __future__ import annotations

import sys

import pytest

from tools import treemem

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

# A parent holding 100 MB forks a child that holds 200 MB more while the parent waits.
FORKED = """
import os, time
import numpy as np
held = np.ones(100 << 20, np.uint8)
pid = os.fork()
if pid == 0:
    more = np.ones(200 << 20, np.uint8)
    time.sleep(1.0)
    os._exit(0)
os.waitpid(pid, 0)
"""


def test_the_peak_counts_the_forked_child_beside_its_parent():
    found = treemem.measure([sys.executable, "-c", FORKED], every=0.02)
    assert found.returncode == 0 and found.processes == 2
    # both processes' own memory, the 100 MB the fork shares counted once, not twice
    assert 300 <= found.peak_pss_mb < 380 and found.peak_rss_mb >= found.peak_pss_mb + 80


def test_a_failing_command_keeps_its_exit_status():
    assert treemem.measure([sys.executable, "-c", "raise SystemExit(3)"]).returncode == 3
