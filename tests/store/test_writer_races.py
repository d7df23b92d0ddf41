"""Two writers to one path, the second starting at offsets all around the moment the first
finishes (its close, the rename of its golden into place, the removal of its journal). The
second is refused while the first runs; if it started before the first's golden was in place
and still got going, it never replaces that golden but is kept beside it, and its close() says
so. It replaces the first's golden only when that golden was there as it started, as any later
recording in mode 'w' does. TRACEKIT_RACE_ROUNDS sets the rounds (default 50)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time

import pytest

import tracekit
from tracekit.store._format import userblock_token

from ..support import ROOT

ROUNDS = int(os.environ.get("TRACEKIT_RACE_ROUNDS", "50"))
SPACING = 0.6  # seconds between rounds: the first writer records, then closes at its time


def _offsets(rounds):
    """Where the second writer starts, relative to the first's close: half over the first's last
    0.3 s of recording and just after, half within 20 ms of its close."""
    rng = random.Random(30)
    wide = [rng.uniform(-0.3, 0.1) for _ in range(rounds - rounds // 2)]
    return wide + [rng.uniform(-0.02, 0.02) for _ in range(rounds // 2)]


def _run(role, directory, schedule):
    return subprocess.Popen([sys.executable, "-m", "tests.store.race_child", role, directory, json.dumps(schedule)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=ROOT), universal_newlines=True)


def _events(out, word):
    return {int(line.split()[1]): line.split(None, 2)[2] if len(line.split()) > 2 else ""
            for line in out.splitlines() if line.startswith(word + " ")}


@pytest.mark.slow
@pytest.mark.modern  # the lock is the same in both environments: raced once, in the modern run
def test_a_second_writer_never_silently_replaces_the_first(tmp_path):
    offsets = _offsets(ROUNDS)
    closes = [0.5 + i * SPACING for i in range(ROUNDS)]  # after the start both children are given
    a = _run("a", str(tmp_path), closes)
    b = _run("b", str(tmp_path), [at + off for at, off in zip(closes, offsets)])
    for child in (a, b):  # however long importing takes here, both start from one moment
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
    start = "%f\n" % time.time()
    for child in (a, b):
        child.stdin.write(start)
        child.stdin.flush()
    (a_out, a_err), (b_out, b_err) = a.communicate(timeout=600), b.communicate(timeout=600)
    assert a.returncode == 0 and b.returncode == 0, (a_err[-3000:], b_err[-3000:])
    tokens, found, skipped = _events(a_out, "token"), _events(b_out, "found"), _events(a_out, "skipped")
    refused, beside, done = _events(b_out, "refused"), _events(b_out, "beside"), _events(b_out, "done")
    rounds = set(range(ROUNDS))
    assert set(tokens) | set(skipped) == rounds and set(refused) | set(beside) | set(done) == rounds
    assert len(skipped) <= ROUNDS // 10, "the machine could not keep the schedule: %d rounds skipped" % len(skipped)
    silent, kept = [], []
    for i in sorted(tokens):
        path = str(tmp_path / ("%d.h5" % i))
        assert tracekit.verify(path).ok
        at_path = userblock_token(path)
        if i in done:  # the second recording is in place: it must have seen the first's golden there
            if found[i] != tokens[i]:
                silent.append((i, round(offsets[i], 4), found[i]))
            assert at_path != tokens[i]
            continue
        assert at_path == tokens[i]  # the first recording is whole at its path
        if i in refused:
            assert "is being recorded right now by another writer" in refused[i]
        else:  # started before the first's golden was in place: kept beside it, and close() said where
            assert found[i] == "none" and "while this recording ran" in beside[i]
            other = beside[i].split(" is kept at ")[1].split(";")[0]
            assert tracekit.verify(other).ok and os.path.dirname(other) == str(tmp_path)
            kept.append(other)
    assert not silent, "a second writer replaced a golden it did not see when it started: %s" % silent
    assert refused  # the races covered refusals while the first ran
    assert sorted(os.listdir(str(tmp_path))) == sorted(["%d.h5" % i for i in range(ROUNDS)] +
                                                       [os.path.basename(k) for k in kept])


def test_a_golden_put_in_place_while_a_recording_runs_is_not_replaced(tmp_path):
    # The deterministic form of the race: another recording's golden lands at the path after this
    # writer started (found nothing there) and before it closes.
    path = str(tmp_path / "g.h5")
    late = str(tmp_path / "late.h5")
    writer = tracekit.create(path, meta={"user": {"writer": "b"}})
    with writer.step():
        writer.add("loss", "loss", 1.0)
    with tracekit.create(late, meta={"user": {"writer": "a"}}) as other:
        with other.step():
            other.add("loss", "loss", 2.0)
    os.replace(late, path)
    with pytest.raises(tracekit.TraceWriteError, match="put at .* while this recording ran.*kept at") as info:
        writer.close()
    kept = info.value.args[0].split(" is kept at ")[1].split(";")[0]
    with tracekit.open(path) as trace:
        assert trace.meta["user"] == {"writer": "a"}
    with tracekit.open(kept) as trace:
        assert trace.meta["user"] == {"writer": "b"} and trace.step(0)["loss/loss"] == 1.0
    assert sorted(os.listdir(str(tmp_path))) == sorted(["g.h5", os.path.basename(kept)])
    # a golden that was there when the recording started is replaced, as mode 'w' says; one removed
    # while a recording ran is no reason to keep the recording aside
    writer = tracekit.create(path, meta={"user": {"writer": "d"}})
    os.remove(path)
    writer.close()
    with tracekit.open(path) as trace:
        assert trace.meta["user"] == {"writer": "d"}
    with tracekit.create(path, meta={"user": {"writer": "c"}}) as writer:
        with writer.step():
            writer.add("loss", "loss", 3.0)
    with tracekit.open(path) as trace:
        assert trace.meta["user"] == {"writer": "c"}
