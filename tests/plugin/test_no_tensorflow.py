"""Without TensorFlow the plugin still loads (it imports none), and a replay test fails with
one line naming the extra to install."""

from __future__ import annotations


def test_a_replay_without_tensorflow_says_what_to_install(project):
    project.makeconftest("import sys\nsys.modules['tensorflow'] = None  # as if it were not installed\n")
    project.makepyfile(test_port="""
def test_port(tracekit_replay):
    tracekit_replay("seed_example", lambda inputs: None)
""")
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["tracekit.tf2 replays on TensorFlow 2, which does not import here (*): pip install "
                                 "'tracekit[[]tf2]' (TensorFlow 2 and tf-keras of the same minor version)"])
    assert "Traceback" not in result.stdout.str()
