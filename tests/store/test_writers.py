"""Two recordings to one path: the second is refused at once, neither is lost or mixed, and
a golden already at the path stays whole until a recording replaces it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import tracekit
from tracekit.cli import main
from tracekit.store._format import PARTIAL_SUFFIX

from ..support import ROOT, write_steps


def _start(path, name, start_at, steps=20):
    return subprocess.Popen([sys.executable, "-m", "tests.store.writer_child", path, name,
                             "-" if start_at is None else "%f" % start_at, str(steps)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=ROOT), universal_newlines=True)


def started_together(procs, offsets):
    """Once every child has imported tracekit (however long that takes on this machine), hand
    each its start time: a moment from now, plus its offset."""
    for proc in procs.values():
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    start = time.time() + 0.2
    for name, proc in procs.items():
        proc.stdin.write("%f\n" % (start + offsets.get(name, 0.0)))
        proc.stdin.flush()


@pytest.mark.parametrize("offset", [0.0, 0.0, 0.01, 0.05, 0.1, 0.1])
def test_two_writers_race_and_one_recording_survives_whole(tmp_path, offset):
    path = str(tmp_path / "g.h5")
    procs = {"a": _start(path, "a", None), "b": _start(path, "b", None)}
    started_together(procs, {"b": offset})
    ends = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert "Traceback" not in err, err
        ends[name] = (proc.returncode, out.split())
    done = [name for name, (code, _) in ends.items() if code == 0]
    refused = [name for name, (code, _) in ends.items() if code == 3]
    # 20 steps take over 0.4 s: the recordings overlap, so exactly one may go on.
    assert len(done) == 1 and len(refused) == 1, ends
    winner, loser = done[0], refused[0]
    words = ends[loser][1]
    assert " ".join(words[2:]).startswith("%s is being recorded right now by another writer" % path)
    assert float(words[1]) < float(ends[winner][1][1])  # refused before the other finished: at once
    with tracekit.open(path) as trace:
        assert trace.complete and len(trace) == 20 and trace.meta["user"] == {"writer": winner}
        assert trace.step(19)["var/w"][0] == 19
    assert tracekit.verify(path).ok
    assert sorted(os.listdir(str(tmp_path))) == ["g.h5"]  # no journal, partial file or lock left


def test_a_golden_stays_whole_until_a_new_recording_replaces_it(tmp_path, capsys):
    path = write_steps(str(tmp_path / "g.h5"), 3)
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    w = tracekit.create(path, meta={"user": {"take": 2}})
    for k in range(2):
        with w.step():
            w.add("loss", "loss", np.float32(k))
    w.flush()
    # While it records, the path still holds the old golden, and says a recording runs.
    assert hashlib.sha256(open(path, "rb").read()).hexdigest() == digest
    with tracekit.open(path) as trace:
        assert trace.complete and len(trace) == 3 and "is running" in trace.recording
    with tracekit.open(path + ".journal") as trace:  # the recording itself
        assert not trace.complete and trace.writing and len(trace) == 2
    assert main(["verify", path]) == 0
    assert "note: a new recording to this path is running" in capsys.readouterr().out
    assert main(["recover", path]) == 2  # not while its writer lives
    capsys.readouterr()
    w._sink.journal.close()  # the writer dies
    with tracekit.open(path) as trace:
        assert len(trace) == 3 and "was interrupted" in trace.recording
    assert main(["recover", path]) == 0
    assert "recovered %s: 2 steps" % path in capsys.readouterr().out
    with tracekit.open(path) as trace:
        assert trace.complete and trace.recovered and trace.meta["user"] == {"take": 2} and trace.recording is None
    assert sorted(os.listdir(str(tmp_path))) == ["g.h5"]


def test_a_finished_recording_replaces_the_golden(tmp_path):
    path = write_steps(str(tmp_path / "g.h5"), 3)
    with tracekit.create(path, meta={"user": {"take": 2}}) as w:
        with w.step():
            w.add("loss", "loss", np.float32(7))
    with tracekit.open(path) as trace:
        assert trace.complete and len(trace) == 1 and trace.meta["user"] == {"take": 2}
    assert sorted(os.listdir(str(tmp_path))) == ["g.h5"]


def test_exclusive_mode_names_a_running_recording(tmp_path):
    path = str(tmp_path / "g.h5")
    w = tracekit.create(path)
    try:
        with pytest.raises(tracekit.TraceWriteError, match="being recorded right now by another writer"):
            tracekit.create(path, mode="x")
        with pytest.raises(tracekit.TraceWriteError, match="being recorded right now by another writer"):
            tracekit.create(path)
    finally:
        w.close()
    with pytest.raises(tracekit.TraceWriteError, match="already exists"):
        tracekit.create(path, mode="x")


@pytest.mark.parametrize("moment", ["journal", "chunks"])
def test_a_recording_that_finishes_while_a_reader_opens_it_reads_as_the_golden(tmp_path, monkeypatch, moment):
    # The writer finishes (chunks renamed into the golden, journal removed) just as the reader
    # opens the journal, or after it has the journal and before it opens the chunks.
    from tracekit.store._backends import journal as backend

    path = str(tmp_path / "g.h5")
    writer = tracekit.create(path)
    with writer.step():
        writer.add("var", "w", np.arange(4096, dtype=np.float32))
    real_open, real_init = open, backend.JournalBackend.__init__

    def finish_then(opened):
        def late(*args, **kwargs):
            if not writer.closed:
                writer.close()
            return opened(*args, **kwargs)
        return late

    if moment == "journal":
        monkeypatch.setattr(backend.JournalBackend, "__init__", finish_then(real_init))
    else:
        def opens(name, *args, **kwargs):  # the journal opens, then the writer finishes
            return (finish_then(real_open) if name.endswith(PARTIAL_SUFFIX) else real_open)(name, *args, **kwargs)
        monkeypatch.setattr(backend, "open", opens, raising=False)
    with tracekit.open(path) as trace:
        assert trace.complete and np.array_equal(trace.step(0)["var/w"], np.arange(4096, dtype=np.float32))


def test_a_reader_polling_a_recording_never_sees_damage(tmp_path):
    # As the recording starts (journal made, file not yet) and ends (file renamed, journal
    # removed) a reader sees "no trace", an unfinished one or the golden: never "damaged".
    path = str(tmp_path / "g.h5")
    proc = _start(path, "a", None, steps=30)
    started_together({"a": proc}, {})
    seen = set()
    while True:
        finished = proc.poll() is not None  # then one last look, at the golden
        try:
            with tracekit.open(path) as trace:
                seen.add("complete" if trace.complete else "unfinished")
                for step in trace:
                    step["var/w"]
        except tracekit.GoldenNotFound:
            seen.add("none")
        if finished:
            break
    assert proc.wait() == 0, proc.stderr.read()
    assert {"none", "unfinished", "complete"} <= seen
