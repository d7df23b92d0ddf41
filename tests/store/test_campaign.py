"""The store's damage-and-fuzz campaign (tools/store_campaign.py), bounded: damaged copies of the
shipped goldens (and a few of the earlier layout's) and hostile files, each verified by the CLI and read back in fresh processes,
must give one clear error or the right values; never a crash, a raw traceback, a hang, a huge
allocation or a silently wrong value. Plus the classifier and the child runner themselves."""

from __future__ import annotations

import os
import random
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from tools import store_campaign as sc

from ..support import FOREIGN_GOLDENS

pytestmark = pytest.mark.modern

PY = sys.executable


def test_bounded_campaign():
    # 24 + 24 cases. Every bug case is listed with the command that reruns it.
    campaign = sc.run_campaign(seed=20240, cases=24, fuzz=24, jobs=2, controls=False)
    assert all(c.outcome for c in campaign.cases)
    assert sum(c.outcome == "reported" for c in campaign.cases if c.kind == "damage") >= 12  # damage is seen
    assert not any(c.outcome == "unprotected" for c in campaign.cases)  # the shipped goldens carry every checksum
    if campaign.bugs:
        pytest.fail(sc.report(campaign), pytrace=False)


def test_bounded_campaign_on_goldens_of_the_earlier_layout():
    # Goldens written before the step index and the metadata checksums still never crash
    # `verify`, raise raw or read a tensor wrong (their metadata is the documented limit).
    campaign = sc.run_campaign(seed=20241, cases=8, fuzz=6, jobs=2, controls=False, goldens_dir=FOREIGN_GOLDENS)
    assert all(c.outcome for c in campaign.cases) and any(c.outcome == "reported" for c in campaign.cases)
    if campaign.bugs:
        pytest.fail(sc.report(campaign), pytrace=False)


def test_an_undamaged_golden_reads_back_intact():
    # The harness itself: verify ok and every fingerprint equal to the one read in-process.
    goldens = sc.goldens_in(sc.GOLDENS_DIR)
    smallest = goldens.index(min(goldens, key=os.path.getsize))
    campaign = sc.run_campaign(only=["c%d" % smallest])
    assert [(c.outcome, c.label) for c in campaign.cases] == [("intact", "undamaged")], sc.report(campaign)
    assert campaign.baseline.returncode == 0 and 10 < campaign.baseline.maxrss_mb < 500


def test_cases_are_reproducible(tmp_path):
    goldens = sc.goldens_in(sc.GOLDENS_DIR)
    bases = sc.make_bases(str(tmp_path), goldens)
    made = []
    for run in range(2):
        work = tmp_path / str(run)
        work.mkdir()
        cases = sc.plan(goldens, 0, 0, only=["d%d" % i for i in range(10)] + ["f5", "f23"])
        for case in cases:
            sc.prepare(case, 7, str(work), goldens, bases)
        made.append([(c.label, c.golden, c.outcome, Path(c.path).read_bytes() if c.kind == "damage" else b"")
                     for c in cases])
    assert made[0] == made[1]
    assert len({c.golden for c in cases if c.kind == "damage"}) > 1


# ---- the classifier, on made-up children ---------------------------------------------------------

def child(role, rc=0, stdout="", stderr="", **kw):
    return sc.ChildResult(role, rc, stdout=stdout, stderr=stderr, **kw)


# The two children on the undamaged file: what time and memory are judged against.
CALIBRATION = {"verify": child("verify", cpu_s=0.5, wall_s=0.6, maxrss_mb=120.0),
               "read": child("read", cpu_s=0.4, wall_s=0.5, maxrss_mb=110.0)}


def read_out(items, errors=()):
    lines = ['{"k": "%s", "d": "%s"}' % kv for kv in items.items()]
    lines += ['{"e": "%s", "m": "%s", "n": %d}' % (key, msg, len(msg)) for key, msg in errors]
    return "\n".join(lines)


ORIGINAL = {"header": "h", "meta": "m", "value/0/loss/loss": "v"}
CHANGED = dict(ORIGINAL, **{"value/0/loss/loss": "other"})
LOST = {k: v for k, v in ORIGINAL.items() if k != "meta"}
TRACEBACK = 'Traceback (most recent call last):\n  File "/x/tracekit/store/values.py", line 3, in f\nTypeError: bad'


@pytest.mark.parametrize("verify, read, original, expected", [
    (child("verify"), child("read", 0, read_out(ORIGINAL)), ORIGINAL, "intact"),
    (child("verify"), child("read", 0, read_out(CHANGED)), ORIGINAL, "silent"),
    (child("verify"), child("read", 0, read_out(LOST)), ORIGINAL, "silent"),  # nothing raised, meta gone
    (child("verify", 1, "DAMAGED x: 1 problem\n  x: bad"), child("read", 0, read_out(CHANGED)), ORIGINAL,
     "reported-but-wrong-read"),
    (child("verify", 1, "DAMAGED x"), child("read", 1, read_out(LOST, [("meta", "bad")])), ORIGINAL, "reported"),
    (child("verify"), child("read", 1, read_out(LOST, [("meta", "bad")])), ORIGINAL, "verify-missed"),
    (child("verify", 2, "UNREADABLE x"), child("read", 1), None, "reported"),
    (child("verify"), child("read"), None, "accepted"),
    (child("verify", 1, stderr=TRACEBACK), child("read"), None, "raw"),
    (child("verify", 3), child("read"), None, "raw"),
    (child("verify", 1, "x: cannot be read (MemoryError: Unable to allocate 3.6 TiB)"), child("read"), None, "memory"),
    (child("verify", maxrss_mb=330.0), child("read"), None, "memory"),  # 210 MB over the undamaged file's
    (child("verify", maxrss_mb=310.0), child("read"), None, "accepted"),
    (child("verify", -9, timed_out=True), child("read"), None, "timeout"),
    (child("verify", cpu_s=4.1), child("read"), None, "slow"),  # over 8x the undamaged file's 0.5 s
    (child("verify", cpu_s=3.9), child("read", 0, read_out(ORIGINAL)), ORIGINAL, "intact"),
    (child("verify"), child("read", cpu_s=3.3), None, "slow"),  # each child against its own calibration
    (child("verify", 1, "DAMAGED x: " + "y" * 5000), child("read", 1), None, "verbose"),
    (child("verify"), child("read", -11), ORIGINAL, "api-crash"),  # the Python API crashed its process
    (child("verify", 1, "DAMAGED x: the HDF5 library crashed"), child("read", -11), ORIGINAL, "api-crash"),
    (child("verify", -11), child("read", 1), ORIGINAL, "crash"),
])
def test_classify(verify, read, original, expected):
    kind = "fuzz" if original is None else "damage"
    assert sc.classify(kind, verify, read, original, sc.Limits(), CALIBRATION)[0] == expected


def test_limits_are_relative_to_the_same_work_on_the_undamaged_file():
    # A machine four times slower calibrates four times slower: the same case is not slow there.
    slow_machine = {role: child(role, cpu_s=4 * c.cpu_s, wall_s=4 * c.wall_s, maxrss_mb=c.maxrss_mb)
                    for role, c in CALIBRATION.items()}
    case = child("verify", cpu_s=4.1)
    assert sc.classify("fuzz", case, child("read"), None, sc.Limits(), CALIBRATION)[0] == "slow"
    assert sc.classify("fuzz", case, child("read"), None, sc.Limits(), slow_machine)[0] == "accepted"
    assert sc.Limits().timeout_s(slow_machine["verify"]) == max(30.0, 30 * 2.4)


def test_old_goldens_metadata_is_their_known_limit_and_nothing_else():
    meta_changed = dict(ORIGINAL, meta="other")
    for old_format, original, read, expected in [
            (True, ORIGINAL, meta_changed, "unprotected"),  # a golden from before the metadata checksum
            (False, ORIGINAL, meta_changed, "silent"),  # a current one must catch it
            (True, ORIGINAL, CHANGED, "silent")]:  # a tensor is checksummed in every golden
        got = sc.classify("damage", child("verify"), child("read", 0, read_out(read)), original, sc.Limits(),
                          CALIBRATION, old_format=old_format)[0]
        assert got == expected, (old_format, read, got)


def test_a_segfault_is_a_crash():
    segv = sc.run_child([PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], role="verify")
    assert segv.signal == signal.SIGSEGV and not segv.timed_out
    outcome, detail = sc.classify("fuzz", segv, child("read"), None, sc.Limits(), CALIBRATION)
    assert outcome == "crash" and "SIGSEGV" in detail


def test_a_hang_is_a_timeout_and_says_where():
    hang = sc.run_child([PY, "-c", "import time\ndef stuck():\n    time.sleep(600)\nstuck()"], role="verify", timeout_s=1)
    assert hang.timed_out and hang.returncode != 0  # interrupted by the harness, not ended by itself
    assert sc.classify("fuzz", hang, child("read"), None, sc.Limits(), CALIBRATION)[0] == "timeout"
    assert "in stuck" in hang.stderr  # SIGINT first: the traceback shows where it hung


def test_the_address_space_limit_turns_a_huge_allocation_into_memory():
    big = sc.run_child([PY, "-c", "bytearray(3 << 30)"], sc.Limits(mem_limit_mb=1024), role="verify")
    assert big.returncode == 1 and big.maxrss_mb < 200
    assert sc.classify("fuzz", big, child("read"), None, sc.Limits(), CALIBRATION)[0] == "memory"


def test_fingerprints_see_every_bit():
    nan = np.array([0x7FC00000, 0x7FC00001], dtype="<u4").view("<f4")
    pairs = [(nan[:1], nan[1:]), (np.float32(0.0), np.float32(-0.0)), (np.zeros(2, "f4"), np.zeros(2, "i4")),
             (np.zeros(4, "u1"), np.zeros((2, 2), "u1")), ([1, 2], (1, 2)), ({"a": 1.0}, {"a": 1}),
             (np.array([b"a", b"b"], dtype=object), np.array([b"a", b"c"], dtype=object))]
    for a, b in pairs:
        assert sc.fingerprint(a) != sc.fingerprint(b), (a, b)
    assert sc.fingerprint(nan.copy()) == sc.fingerprint(nan) and sc.fingerprint(random.Random(1).random()) \
        == sc.fingerprint(random.Random(1).random())
