"""tracekit pending / accept / reject / review / log, and derived goldens flagged in show and
every comparison report. Both environments (synthetic goldens, no TensorFlow)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import tracekit
from tracekit.cli import main
from tracekit.lifecycle import pending
from tracekit.lifecycle.workspace import Workspace
from tracekit.store import provenance

from ..support import ROOT
from ..support.lifecycle import bump, legacy_golden, replayed


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project with a legacy golden and two pending actuals: `toy` (loss moved from step 2)
    and `other` (a new golden)."""
    monkeypatch.delenv("CI", raising=False)  # accepting writes goldens: never in CI (tested below)
    (tmp_path / "goldens").mkdir()
    golden = legacy_golden(str(tmp_path / "goldens" / "toy.h5"))
    workspace = Workspace(str(tmp_path))
    pending.keep(workspace, "toy", replayed(str(tmp_path / "a.h5"), change=bump(2, "loss/loss")), golden=golden,
                 kind=pending.MISMATCH, headline="step 2, loss/loss: max abs 0.001", report="REPORT OF toy",
                 test="tests/test_ports.py::test_toy", run="r")
    pending.keep(workspace, "other", replayed(str(tmp_path / "b.h5")), golden=str(tmp_path / "goldens" / "other.h5"),
                 kind=pending.NEW, headline="a new golden: 4 steps", report="REPORT OF other",
                 test="tests/test_ports.py::test_other", run="r")
    return workspace, golden


def cli(workspace, *args, stdin=None):
    """The tracekit command in a child process, run from the project root."""
    done = subprocess.run([sys.executable, "-m", "tracekit"] + list(args), cwd=workspace.root, input=stdin,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    return done.returncode, done.stdout, done.stderr


def history(path):
    with tracekit.open(path) as trace:
        return provenance.read(trace.meta, trace.created)


def test_pending_lists_entries_with_their_verdicts(project, capsys):
    workspace, _ = project
    assert main(["pending", "--workspace", workspace.root]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["name", "kind", "golden", "test", "verdict"]
    assert out[2].split()[:4] == ["other", "new", "golden", "goldens/other.h5"]
    assert "goldens/toy.h5" in out[3] and "step 2, loss/loss: max abs 0.001" in out[3]


def test_accept_by_name_with_a_reason_then_log_shows_it(project, capsys):
    workspace, golden = project
    code, out, err = cli(workspace, "accept", "toy", "--reason", "Keras 3 port")
    assert code == 0, err
    assert out.startswith("accepted toy: rewrote %s; the replaced golden is kept at " % golden)
    assert [e.name for e in pending.entries(workspace)] == ["other"]
    prov = history(golden)
    assert prov.derived and [u.reason for u in prov.updates] == ["Keras 3 port"]
    assert main(["log", golden]) == 0
    log = capsys.readouterr().out
    assert "origin   DERIVED: its data comes from a TF2 run (updated " in log and "Keras 3 port" in log
    assert "recorded " in log and "command  train.py" in log and "test     tests/test_ports.py::test_toy" in log
    assert "kept     the replaced legacy-recorded golden at " in log
    drift = {line.split()[0]: line.split()[1:] for line in log[log.index("drift against"):].splitlines()[3:]}
    assert drift["loss"] == ["1/1", "0.001", "0.004", "step", "2"] and drift["grad"][:2] == ["0/1", "0"]


def test_accept_by_path_without_keeping_and_all(project):
    workspace, golden = project
    code, out, err = cli(workspace, "accept", os.path.join(".tracekit", "pending", "toy.h5"), "--no-keep")
    assert code == 0 and "kept" not in out, err
    assert history(golden).updates[0].replaced is None and not os.path.exists(workspace.history)
    code, out, err = cli(workspace, "accept", "--all", "--reason", "batch")
    assert code == 0 and out.startswith("accepted other: created "), err
    assert history(os.path.join(workspace.root, "goldens", "other.h5")).updates[0].created
    assert cli(workspace, "accept", "--all")[1].startswith("no pending actuals")


def test_accept_refuses_in_ci_and_two_entries_for_one_golden(project, tmp_path, monkeypatch):
    workspace, golden = project
    before = open(golden, "rb").read()
    monkeypatch.setenv("CI", "1")
    code, _, err = cli(workspace, "accept", "toy")
    assert code == 1 and "CI is set (CI=1): tracekit does not write" in err and open(golden, "rb").read() == before
    monkeypatch.delenv("CI")
    pending.keep(workspace, "toy", replayed(str(tmp_path / "c.h5")), golden=golden, kind=pending.MISMATCH,
                 headline="h", report="r", test="tests/test_ports.py::test_shim", run="r")
    code, _, err = cli(workspace, "accept", "--all")
    assert code == 2 and "several pending actuals for one golden: goldens/toy.h5 (toy, toy~2)" in err
    code, out, err = cli(workspace, "accept", "toy~2", "goldens/other.h5")  # by name, and by its golden's path
    assert code == 0 and "accepted toy~2" in out and "accepted other: created" in out, err


def test_reject_and_usage_errors(project):
    workspace, golden = project
    before = open(golden, "rb").read()
    code, out, _ = cli(workspace, "reject", "toy")
    assert code == 0 and out.startswith("rejected toy: goldens/toy.h5 stays as it is")
    assert open(golden, "rb").read() == before
    code, _, err = cli(workspace, "accept", "toy")
    assert code == 2 and "no pending actual toy" in err and "pending: other" in err
    code, _, err = cli(workspace, "accept")
    assert code == 2 and "or give --all" in err
    code, _, err = cli(workspace, "reject", "--all", "other")
    assert code == 2 and "or give --all" in err


def test_review_reads_its_answers_from_stdin(project):
    workspace, golden = project
    # other: a wrong key then skip; toy: accept.
    code, out, err = cli(workspace, "review", "--reason", "reviewed", stdin="x\ns\na\n")
    assert code == 0, err
    assert "[1/2]" in out and "REPORT OF other" in out and "skipped other: still pending" in out
    assert "[2/2]" in out and "REPORT OF toy" in out and "accepted toy: rewrote" in out
    assert [u.reason for u in history(golden).updates] == ["reviewed"]
    code, out, _ = cli(workspace, "review", stdin="r\n")
    assert code == 0 and "rejected other" in out and pending.entries(workspace) == []
    assert cli(workspace, "review", stdin="")[1].startswith("no pending actuals")


def test_review_stops_at_quit_or_end_of_input(project):
    workspace, _ = project
    assert "(end of input)" in cli(workspace, "review", stdin="")[1]
    code, out, _ = cli(workspace, "review", stdin="q\n")
    assert code == 0 and "REPORT OF other" in out and "REPORT OF toy" not in out
    assert len(pending.entries(workspace)) == 2


def test_a_derived_golden_is_flagged_in_show_and_in_reports(project, tmp_path, capsys):
    workspace, golden = project
    main(["show", golden])
    assert "origin    legacy recording, recorded " in capsys.readouterr().out
    pending.accept(workspace, pending.find(workspace, "toy"), reason="ported")
    main(["show", golden])
    shown = capsys.readouterr().out
    assert "origin    DERIVED: its data comes from a TF2 run (updated " in shown and "ported" in shown
    assert "provenance" not in shown  # tracekit log shows it
    actual = replayed(str(tmp_path / "again.h5"), change=bump(2, "loss/loss"))
    report = tracekit.compare(golden, actual).report().splitlines()
    assert report[1].startswith("golden is DERIVED: its data comes from a TF2 run") and "tracekit log" in report[1]
    legacy = legacy_golden(str(tmp_path / "legacy.h5"))
    assert "DERIVED" not in tracekit.compare(legacy, actual).report()
