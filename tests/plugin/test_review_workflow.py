"""The update workflow end to end: a failing replay test leaves a pending actual, `tracekit
review` accepts it from standard input, and the test passes against its new, derived golden;
a rejected one leaves the golden as it was."""

from __future__ import annotations

import subprocess
import sys

import tracekit
from tracekit.store import provenance

TEST = """
from port import make

def test_port(tracekit_replay):
    model, step = make(activation=%r)
    tracekit_replay("seed_example", step, model=model)
"""


def tracekit_cli(project, *args, stdin=""):
    done = subprocess.run([sys.executable, "-m", "tracekit"] + list(args), cwd=str(project.path), input=stdin,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_review_accepts_then_the_test_passes_and_reject_keeps_the_golden(project):
    golden = project.path / "goldens" / "seed_example.h5"
    project.makepyfile(test_port=TEST % "relu")
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(failed=1)
    out = tracekit_cli(project, "review", "--reason", "relu on purpose", stdin="a\n")
    assert "first divergence: step 0, tap/layer1" in out and "accepted seed_example: rewrote" in out
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    with tracekit.open(str(golden)) as trace:
        prov = provenance.read(trace.meta, trace.created)
    assert prov.derived and [(u.reason, u.by) for u in prov.updates] == [("relu on purpose", "tracekit accept")]
    assert prov.owners == ["test_port.py::test_port"]
    # A change nobody wants: rejected, the golden stays, the test still fails.
    before = golden.read_bytes()
    project.makepyfile(test_port=TEST % "tanh")
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(failed=1)
    assert "seed_example" in tracekit_cli(project, "pending")
    assert tracekit_cli(project, "reject", "seed_example").startswith("rejected seed_example")
    assert golden.read_bytes() == before and "no pending actuals" in tracekit_cli(project, "pending")
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(failed=1)
