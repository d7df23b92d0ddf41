"""tracekit._heap.give_back: the C heap's free pages returned to the system. Freed blocks
below the top of glibc's heap stay resident until then (a block still in use above them keeps
free() from trimming): what a recording's audit leaves behind once its copies are let go."""

from __future__ import annotations

import sys

import pytest

from tracekit._heap import give_back


def _resident_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and glibc's malloc_trim")
def test_freed_heap_below_a_live_block_is_given_back():
    blocks = [bytearray(32 << 10) for _ in range(8192)]  # 256 MB of small blocks, each from the heap
    keep = bytearray(32 << 10)  # in use above them: free() alone trims nothing
    held = _resident_mb()
    del blocks
    freed = _resident_mb()
    assert give_back() is True
    given = _resident_mb()
    assert freed > held - 64 and given < freed - 128, (held, freed, given)
    del keep
