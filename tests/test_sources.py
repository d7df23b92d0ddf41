"""The user's line of a stack (tracekit/sources.py): the innermost frame outside TensorFlow,
Keras, the test runner, the standard library and tracekit; code a user installed is the
user's; a call over several lines is named at its first; a helper's return names its caller."""

from __future__ import annotations

import os
import sysconfig
import traceback

from hypothesis import given, settings
from hypothesis import strategies as st

import tracekit
from tracekit.sources import Lines, Source, is_user_file, ordered_lines, paired, read_sources, user_source, written

SITE = os.path.join(sysconfig.get_paths()["purelib"])
LIBRARY = [os.path.join(SITE, "tensorflow", "python", "ops", "math_ops.py"),
           os.path.join(SITE, "tf_keras", "src", "engine", "base_layer.py"),
           os.path.join(SITE, "_pytest", "python.py"),
           os.path.join(os.path.dirname(tracekit.__file__), "replay", "loop.py"),
           os.path.join(sysconfig.get_paths()["stdlib"], "runpy.py"),
           "<frozen importlib._bootstrap>", "/tmp/__autograph_generated_filexyz.py"]
ELSEWHERE = "/no/such/env/lib/python3.7/site-packages"  # installed code that is not a framework: the user's
USER = ["/home/team/project/model.py", os.path.join(ELSEWHERE, "bert", "optimization.py"),
        os.path.join(ELSEWHERE, "stable_baselines", "a2c", "a2c.py"), "/work/port/train_step.py"]


def test_library_and_user_files():
    assert not any(is_user_file(path) for path in LIBRARY)
    assert all(is_user_file(path) for path in USER)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(LIBRARY + USER), st.integers(1, 10 ** 6), st.text(max_size=8)),
                max_size=12))
def test_the_innermost_user_frame_is_named(frames):
    tuples = [(path, line, name, "x = 1") for path, line, name in frames]
    found = user_source(tuples)
    users = [f for f in tuples if f[0] in USER]
    if not users:
        assert found is None
    else:
        assert (found.file, found.line, found.function) == users[-1][:3] and found.code == "x = 1"
        assert found.caller is None  # only a return statement names its caller


def test_a_multi_line_statement_and_a_helpers_return(tmp_path):
    path = tmp_path / "helpers.py"
    path.write_text("def mse(a, b):\n    return (a -\n            b)\n\nloss = mse(\n    1,\n    2)\n")
    found = user_source([(str(path), 7, "<module>", "2)"), (str(path), 3, "mse", "b)")])
    assert (found.line, found.code) == (2, "return (a - b)")
    assert (found.caller.line, found.caller.code) == (5, "loss = mse( 1, 2)")
    assert found.short() == "helpers.py:2 `return (a - b)` (called at helpers.py:5 `loss = mse( 1, 2)`)"


def test_frame_summaries_are_read_too():
    here = user_source(traceback.extract_stack())
    assert os.path.samefile(here.file, __file__) and not os.path.isabs(here.file)  # under the working directory
    assert here.function == "test_frame_summaries_are_read_too"
    assert here.code == "here = user_source(traceback.extract_stack())"


SOURCES = st.builds(Source, st.text(min_size=1, max_size=20), st.integers(1, 10 ** 6), st.text(max_size=10),
                    st.text(max_size=30))


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=12),
                       st.builds(Lines, st.none() | SOURCES, st.lists(SOURCES, max_size=3).map(tuple)), max_size=5))
def test_lines_round_trip_through_the_metadata(sources):
    kept = {key: lines for key, lines in sources.items() if lines}
    assert read_sources(written(sources)) == kept


@settings(max_examples=40, deadline=None)
@given(st.recursive(st.none() | st.integers() | st.text(max_size=5) | st.floats(),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=12))
def test_damaged_metadata_reads_as_no_line(stored):
    read = read_sources({"var/w:0": stored, "loss/loss": {"made": stored, "update": stored}})
    assert all(isinstance(lines, Lines) for lines in read.values())
    assert paired({"sources": stored}, {"replay": {"sources": stored}}, {"var/w:0": "var/w:0"}) is not None


def test_a_variables_update_keeps_its_assign_where_lines_are_many():
    lines = [Source("opt.py", n) for n in range(1, 20)] + [Source("opt.py", 3)]
    kept = ordered_lines(lines, limit=5)
    assert [s.line for s in kept] == [1, 2, 3, 4, 19]


def test_pairs_read_each_side_and_a_parts_port_line_from_its_loss():
    golden = {"sources": {"loss/loss@term2": {"made": {"file": "a2c.py", "line": 154}}}}
    actual = {"replay": {"sources": {"loss/loss": {"made": {"file": "port.py", "line": 50}}}}}
    found = paired(golden, actual, {"loss/loss@term2": "loss/loss", "var/absent:0": "var/absent:0"})
    assert list(found) == ["loss/loss@term2"]
    assert (found["loss/loss@term2"].tf1.made.line, found["loss/loss@term2"].port.made.line) == (154, 50)


def test_in_a_replay_only_the_code_tracekit_called_is_the_ports():
    driver, port = ("/work/tests/test_port.py", 40, "test", "with replay(...)"), ("/work/port.py", 12, "step", "w.assign(x)")
    loop = (os.path.join(os.path.dirname(tracekit.__file__), "replay", "loop.py"), 99, "run", "step_fn(x)")
    hook = (os.path.join(os.path.dirname(tracekit.__file__), "replay", "sources.py"), 5, "assign", "original()")
    assert user_source([driver, loop, port, hook], called=True).file == "/work/port.py"
    # a step tracekit builds (keras_train_step) calls no code of the port's: the driver's line is not one
    assert user_source([driver, loop, (LIBRARY[1], 3, "fit", ""), hook], called=True) is None
    assert user_source([driver, port], called=True) is None
    assert user_source([driver, port]).file == "/work/port.py"
