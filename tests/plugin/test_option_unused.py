"""--tracekit-unused=fail|warn|delete: a golden is unused only when the tests that own it were
selected, ran and passed without using it, and every replay test ran to the end. Goldens of
deselected (-k, node ids), skipped, failing or uncollectable tests are kept, and so is a golden
another replay test may read while that test did not run; a legacy recording nobody owns is
never unused."""

from __future__ import annotations

import pytest

# Two tests, each creating (with --tracekit-update=new) and owning a derived golden.
OWNERS = """
from port import DATA, make

def test_a(tracekit_replay):
    model, step = make()
    tracekit_replay("a", step, model=model, data=DATA)

def test_b(tracekit_replay):
    model, step = make(lr=1e-2)
    tracekit_replay("b", step, model=model, data=DATA)
"""

# test_b no longer uses its golden; how it ends is filled in.
LATER = """
import pytest
from port import DATA, make

def test_a(tracekit_replay):
    model, step = make()
    tracekit_replay("a", step, model=model, data=DATA)

%s
def test_b():
    %s
"""


@pytest.fixture
def owned(project):
    project.makepyfile(test_goldens=OWNERS)
    project.runpytest("-p", "no:cacheprovider", "--tracekit-update=new").assert_outcomes(passed=2)
    return project


def later(project, decorator="", body="pass"):
    project.makepyfile(test_goldens=LATER % (decorator, body))


def goldens(project):
    return sorted(p.name for p in (project.path / "goldens").iterdir())


def test_a_golden_its_owner_passed_without_is_unused_a_warning_locally(owned):
    later(owned)
    result = owned.runpytest("-p", "no:cacheprovider")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["replays: 1 passed,*; 0 pending, 1 unused",
                                 "  unused   goldens/b.h5 (owned by test_goldens.py::test_b, which passed without "
                                 "using it)",
                                 "next: remove the unused goldens: --tracekit-unused=delete moves them to "
                                 ".tracekit/history"])
    assert "seed_example" not in result.stdout.str()  # the legacy recording: nobody owns it
    assert goldens(owned) == ["a.h5", "b.h5", "seed_example.h5"]


def test_fail_fails_the_run(owned):
    later(owned)
    result = owned.runpytest("-p", "no:cacheprovider", "--tracekit-unused=fail")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 unused*"])


def test_ci_fails_by_default_and_never_deletes(owned, monkeypatch):
    later(owned)
    monkeypatch.setenv("CI", "true")
    assert owned.runpytest("-p", "no:cacheprovider").ret == pytest.ExitCode.TESTS_FAILED
    assert owned.runpytest("-p", "no:cacheprovider", "--tracekit-unused=delete").ret == pytest.ExitCode.TESTS_FAILED
    assert goldens(owned) == ["a.h5", "b.h5", "seed_example.h5"]


def test_delete_moves_it_to_the_history(owned):
    later(owned)
    before = (owned.path / "goldens" / "b.h5").read_bytes()
    result = owned.runpytest("-p", "no:cacheprovider", "--tracekit-unused=delete")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["  unused   goldens/b.h5 (*); moved to .tracekit/history/goldens/b.*.unused.h5"])
    assert goldens(owned) == ["a.h5", "seed_example.h5"]
    [moved] = (owned.path / ".tracekit" / "history" / "goldens").iterdir()
    assert moved.read_bytes() == before


@pytest.mark.parametrize("how", ["-k", "node id", "skipped", "failed", "uncollectable"])
def test_goldens_of_tests_that_did_not_pass_are_kept(owned, how):
    args = ["-p", "no:cacheprovider", "--tracekit-unused=delete"]
    if how == "-k":
        later(owned)
        args += ["-k", "test_a"]
    elif how == "node id":
        later(owned)
        args += ["test_goldens.py::test_a"]
    elif how == "skipped":
        later(owned, decorator="@pytest.mark.skip(reason='later')")
    elif how == "failed":
        later(owned, body="assert False, 'fails before it replays'")
    else:  # a module that may hold b's readers does not import: nothing can be judged
        later(owned)
        owned.makepyfile(test_broken="import nonexistent_module\n")
        args += ["--continue-on-collection-errors"]
    result = owned.runpytest(*args)
    assert "unused   goldens/b.h5" not in result.stdout.str()
    assert goldens(owned) == ["a.h5", "b.h5", "seed_example.h5"]
    if how == "uncollectable":
        result.stdout.fnmatch_lines(["  not judged: goldens/b.h5 may be unused, but not every replay test ran to the "
                                     "end (1 module failed to collect)"])


def test_a_golden_another_replay_test_reads_is_kept_while_that_test_does_not_run(owned):
    # test_c only reads b (b's owner is test_b). test_b stops using b.
    owned.makepyfile(test_goldens=LATER % ("", "pass") + """
def test_c(tracekit_replay):
    model, step = make(lr=1e-2)
    tracekit_replay("b", step, model=model)
""")
    for args in (["-k", "not test_c"], ["-k", "test_b"]):  # test_c deselected: b is kept, not judged
        result = owned.runpytest("-p", "no:cacheprovider", "--tracekit-unused=delete", *args)
        assert result.ret == 0 and goldens(owned) == ["a.h5", "b.h5", "seed_example.h5"]
        result.stdout.fnmatch_lines(["  not judged: goldens/b.h5 may be unused*(* deselected)"])
    result = owned.runpytest("-p", "no:cacheprovider", "--tracekit-unused=delete")
    result.assert_outcomes(passed=3)
    assert "unused" not in result.stdout.str().split("= tracekit =")[1].replace("0 unused", "")
