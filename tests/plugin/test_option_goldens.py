"""--tracekit-goldens DIR and the tracekit_goldens ini value: where golden names resolve."""

from __future__ import annotations

import shutil

TEST = """
from port import make

def test_port(tracekit_replay):
    model, step = make()
    assert tracekit_replay("seed_example", step, model=model, steps=2).ok
"""


def test_names_resolve_under_the_option_then_the_ini_then_goldens(project):
    project.makepyfile(test_port=TEST)
    (project.path / "elsewhere").mkdir()
    shutil.move(str(project.path / "goldens" / "seed_example.h5"), str(project.path / "elsewhere"))
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*golden goldens/seed_example.h5 does not exist*"])
    result = project.runpytest("-p", "no:cacheprovider", "--tracekit-goldens", "elsewhere")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["tracekit: goldens elsewhere, update none, unused warn"])
    project.makeini("[pytest]\ntracekit_goldens = elsewhere\n")
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    project.runpytest("-p", "no:cacheprovider", "--tracekit-goldens=goldens").assert_outcomes(failed=1)


def test_help_lists_the_options_in_one_group(project):
    result = project.runpytest("--help")
    text = result.stdout.str()
    group = text[text.index("tracekit: replay TF2 ports against golden traces"):]
    for option in ("--tracekit-goldens=DIR", "--tracekit-update={none,new,all}", "--tracekit-reason=TEXT",
                   "--tracekit-unused={fail,warn,delete}", "--tracekit-no-keep"):
        assert option in group[:3000], option
    assert "tracekit_goldens" in text and "tracekit_tolerance" in text
