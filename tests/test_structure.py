"""Input structures round-trip: any nest of tuples, lists and dicts of named leaves is stored in
a form msgpack keeps, and rebuilt from the step's values (hypothesis)."""

from __future__ import annotations

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit import structure

names = st.text("abcxyz:0123456789_", min_size=1, max_size=8)
nests = st.recursive(names, lambda inner: st.one_of(
    st.tuples(inner, inner), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(st.text("abcdefgh", min_size=1, max_size=4), inner, max_size=3)), max_leaves=10)


def _leaves(value):
    if isinstance(value, dict):
        return [n for item in value.values() for n in _leaves(item)]
    if isinstance(value, tuple):
        return [n for item in value for n in _leaves(item)]
    return [value]


@settings(max_examples=300, deadline=None)
@given(nests)
def test_a_structure_round_trips_through_its_stored_form(nest):
    stored = msgpack.unpackb(msgpack.packb(structure.encode(nest, lambda leaf: leaf)), raw=False)
    assert structure.leaves(stored) == _leaves(nest)
    values = {name: "value of " + name for name in _leaves(nest)}
    rebuilt = structure.rebuild(stored, values)
    assert structure.encode(rebuilt, lambda leaf: leaf[len("value of "):]) == structure.encode(nest, lambda l: l)
    if _leaves(nest):
        step = structure.structured(values, {"element": stored})
        assert step["element"] == rebuilt and all(step[name] == values[name] for name in values)


def test_a_structure_whose_leaves_the_step_lacks_is_left_out():
    stored = {"tuple": ["x:0", "y:0"]}
    assert structure.structured({"x:0": 1}, {"element": stored}) == {"x:0": 1}
    assert structure.structured({"x:0": 1, "y:0": 2}, {"element": stored})["element"] == (1, 2)
