"""The tracekit_replay fixture: a replay test in a few lines, passing or failing with the first
divergence on its first line and the traceback at the test; goldens by parameter; the
test's tolerance from its argument, its marker or the ini file."""

from __future__ import annotations

import pytest

PASSING = """
from port import make

def test_seed_port(tracekit_replay):
    model, step = make()
    result = tracekit_replay("seed_example", step, model=model)
    assert result.ok and result.steps == 10
"""


def test_a_correct_port_passes(project):
    project.makepyfile(test_seed=PASSING)
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*tracekit: goldens goldens, update none, unused warn*",
                                 "*= tracekit =*", "replays: 1 passed, 0 failed, 0 missing, 0 created, 0 updated; "
                                 "0 pending, 0 unused"])
    assert not (project.path / ".tracekit" / "pending").exists()


FAILING = """
from port import make

def test_relu_port(tracekit_replay):
    model, step = make(activation="relu")
    tracekit_replay("seed_example", step, model=model, steps=3)
"""


def test_a_wrong_port_fails_with_the_first_divergence_first(project):
    project.makepyfile(test_seed=FAILING)
    result = project.runpytest("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    # pytest -q's short summary line names the golden, the step, the tensor and the error.
    result.stdout.fnmatch_lines(["FAILED test_seed.py::test_relu_port - Mismatch: golden "
                                 "goldens/seed_example.h5: step 0, tap/layer1: max abs * (2 of 4 elements differ)"])
    # The message leads; the test's own frame follows the report, tracekit's frames are hidden.
    out = result.stdout.str()
    result.stdout.fnmatch_lines(["_* test_relu_port _*", "Mismatch: golden goldens/seed_example.h5: step 0, tap/layer1: *",
                                 "", "MISMATCH *"])
    result.stdout.fnmatch_lines(["test_seed.py:5: in test_relu_port",
                                 "    tracekit_replay(\"seed_example\", step, model=model, steps=3)",
                                 "(tracekit's own frames are hidden; pytest --tb=long shows them)"])
    assert "/tracekit/tf2/" not in out and "/tracekit/plugin/" not in out
    assert "first divergence: step 0, tap/layer1 (taps)" in out  # the report follows
    assert "the actual trace is kept as pending seed_example" in out


UNPAIRED = """
from port import make

def test_renamed_port(tracekit_replay):
    model, step = make()
    tracekit_replay("seed_example", step, model=model, steps=3, var_map={"dense/kernel:0": "no/such:0"})
"""


def test_a_var_map_refusal_leads_with_its_message_and_the_tests_frame(project):
    project.makepyfile(test_seed=UNPAIRED)
    result = project.runpytest("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["_* test_renamed_port _*", "ReplayError: the TF2 variables do not match the golden's:",
                                 "*only in the golden: dense/kernel:0 (3, 2)*"])
    result.stdout.fnmatch_lines(["*var_map = {*", "test_seed.py:5: in test_renamed_port",
                                 "    tracekit_replay(\"seed_example\", step, model=model, steps=3, var_map=*",
                                 "(tracekit's own frames are hidden; pytest --tb=long shows them)"])
    out = result.stdout.str()
    assert "/tracekit/replay/" not in out and "/tracekit/plugin/" not in out
    # --tb=long shows everything, tracekit's frames included
    result = project.runpytest("-q", "-p", "no:cacheprovider", "--tb=long")
    out = result.stdout.str()
    assert "tracekit/replay/variables.py" in out and "tracekit.errors.ReplayError: the TF2 variables" in out


def test_report_dir_gets_a_page_for_each_failing_replay(project):
    pytest.importorskip("matplotlib", reason="the HTML report needs matplotlib (tracekit[report])")
    project.makepyfile(test_seed=FAILING + PASSING.replace("from port import make\n", ""))
    result = project.runpytest("-q", "-p", "no:cacheprovider", "--tracekit-report", "reports")
    result.assert_outcomes(failed=1, passed=1)
    pages = sorted(p.name for p in (project.path / "reports").iterdir())
    assert pages == ["test_seed.py_test_relu_port.html"]  # the passing test has none
    page = (project.path / "reports" / pages[0]).read_text()
    assert "MISMATCH" in page and "step 0, tap/layer1" in page and page.count("<svg") >= 4
    assert "HTML report: reports/test_seed.py_test_relu_port.html" in result.stdout.str()


def test_one_golden_per_parameter(project):
    # The same port against its derived goldens: each parameter its own golden, created by the first
    # run with --tracekit-update=new, replayed by the second.
    project.makepyfile(test_seeds="""
import pytest
from port import DATA, make

@pytest.mark.parametrize("lr", [1e-3, 1e-2])
def test_port(tracekit_replay, lr):
    model, step = make(lr=lr)
    tracekit_replay("derived_%g" % lr, step, model=model, data=DATA)
""")
    project.runpytest("-p", "no:cacheprovider", "--tracekit-update=new").assert_outcomes(passed=2)
    assert sorted(p.name for p in (project.path / "goldens").iterdir()) == [
        "derived_0.001.h5", "derived_0.01.h5", "seed_example.h5"]
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["replays: 2 passed, 0 failed*"])


TOLERANT = """
import pytest
import tracekit
from port import make

def port():
    return make(lr=1.0001e-3)  # the rate 0.01% off: fails the learning rate's rtol=1e-6 at step 0

def test_default(tracekit_replay):
    model, step = port()
    tracekit_replay("seed_example", step, model=model, steps=2)

@pytest.mark.tracekit(tolerance=tracekit.Tolerance().rule(kind="lr", rtol=1e-3))
def test_marker(tracekit_replay):
    model, step = port()
    tracekit_replay("seed_example", step, model=model, steps=2)

def test_argument(tracekit_replay):
    model, step = port()
    tracekit_replay("seed_example", step, model=model, steps=2, tolerance="lr.toml")
"""


def test_the_tolerance_comes_from_the_argument_the_marker_or_the_ini(project):
    project.makepyfile(test_tol=TOLERANT)
    (project.path / "lr.toml").write_text('[[rule]]\nkind = "lr"\nrtol = 1e-3\n[[rule]]\nkind = "var"\nrtol = 1e-3\n'
                                          '[[rule]]\nkind = "slot"\nrtol = 1e-3\n')
    result = project.runpytest("-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_tol.py::test_default - *: step 0, lr/learning_rate: *"])
    # The project's default for every replay test, from the ini file.
    project.makeini("[pytest]\ntracekit_tolerance = lr.toml\n")
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=3)
    project.makeini("[pytest]\ntracekit_tolerance = nonsense\n")
    result = project.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*tracekit_tolerance in *tox.ini: tolerance 'nonsense': give a Tolerance, a TOML "
                                 "file, or one of auto, default, exact, gpu, mixed-precision, round-off, training"])


@pytest.mark.parametrize("spelling", ['"seed_example"', '"goldens/seed_example.h5"',
                                      'pathlib.Path("goldens") / "seed_example.h5"'])
def test_a_golden_is_a_name_or_a_path(project, spelling):
    project.makepyfile(test_seed="""
import pathlib
from port import make

def test_port(tracekit_replay):
    model, step = make()
    assert tracekit_replay(%s, step, model=model, steps=2).ok
""" % spelling)
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


JUDGED = """
import functools
from port import make

GOLDEN = %r  # the shipped seed example: 100 steps, judged by its local errors and drift

def test_seed_port_judged(tracekit_replay):
    result = tracekit_replay(GOLDEN, make_port=make, steps=25)
    assert result.judged == "local" and result.ok and result.drift is not None and result.drift.steps == 25

def test_wrong_port_judged(tracekit_replay):
    tracekit_replay(GOLDEN, make_port=functools.partial(make, activation="relu"), steps=25)
"""


def test_a_long_golden_is_judged_with_the_ports_factory(project):
    from ..support import golden

    project.makepyfile(test_seed=JUDGED % golden("seed_example"))
    result = project.runpytest("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "judged: local" in out and "decided by: the local view" in out
    assert "first divergence: step 0, tap/layer1 (taps)" in out and "kept as pending seed_example" in out
