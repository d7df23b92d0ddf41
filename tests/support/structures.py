"""Hypothesis strategies for what a recorder can be handed: the values `Session.run` and a
TF2 step return. Leaves of every storable kind (numeric arrays of any shape, 0-d and empty
ones included; numpy and Python scalars; bytes, str and object arrays of them; datetimes),
and structures of them, leafless ones first among them: None (what `sess.run(train_op)`
returns), empty lists, dicts and tuples, and nests of those. Runs on Python 3.7 (hypothesis
6.79) and 3.11."""

from __future__ import annotations

import collections

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# namedtuples as TF returns them (LSTMStateTuple, ...): types made once, as a program has them
Pair = collections.namedtuple("Pair", ["first", "second"])
State = collections.namedtuple("LSTMStateTuple", ["c", "h"])
Empty = collections.namedtuple("Empty", [])

NUMERIC = ["f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "c8", "c16", "?", ">f4", "<i8"]
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
TEXT = st.text(max_size=8)
BYTES = st.binary(max_size=8)
# shapes up to 2,000 elements: past 4 KiB a leaf is stored chunked (and XOR-delta for variables)
SHAPES = st.one_of(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),
                   st.tuples(st.integers(1, 2000)))


def _numeric_arrays():
    return st.sampled_from(NUMERIC).flatmap(lambda dt: hnp.arrays(np.dtype(dt), SHAPES))


def _object_array(items, shape_side):
    def build(values):
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
        return arr
    return st.lists(items, max_size=shape_side).map(build)


def leaves():
    """One storable leaf of any kind."""
    return st.one_of(
        _numeric_arrays(),
        hnp.arrays(np.dtype("S4"), hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=4)),
        hnp.arrays(np.dtype("U3"), hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=4)),
        _object_array(BYTES, 5),
        _object_array(TEXT, 5),
        st.integers(-(1 << 40), 1 << 40).map(lambda n: np.array([n, 0], dtype="datetime64[ms]")),
        st.sampled_from(NUMERIC).flatmap(lambda dt: hnp.from_dtype(np.dtype(dt)).map(lambda x: np.dtype(dt).type(x))),
        st.booleans(), INT64, st.floats(allow_nan=True), st.complex_numbers(allow_nan=False), BYTES, TEXT,
    )


KEYS = st.one_of(TEXT, st.integers(-5, 5), BYTES)


def values(max_leaves=12):
    """A leaf, or a structure (None, lists, tuples, dicts, namedtuples; empty ones too) of leaves."""
    def extend(children):
        return st.one_of(
            st.lists(children, max_size=4),
            st.lists(children, max_size=4).map(tuple),
            st.dictionaries(KEYS, children, max_size=4),
            st.tuples(children, children).map(lambda t: Pair(*t)),
            st.tuples(children, children).map(lambda t: State(*t)),
        )
    return st.one_of(st.none(), st.just([]), st.just({}), st.just(()), st.just(Empty()),
                     st.recursive(st.one_of(st.none(), leaves()), extend, max_leaves=max_leaves))


NAMES = st.sampled_from(["fetches", "train", "dense/kernel:0", "outs", "a b/ünï:0"])
KINDS = st.sampled_from(["fetch", "var", "tap", "loss"])


def steps(max_steps=3):
    """Steps of {(kind, name): value}; the same names recur, so variables are delta-encoded."""
    step = st.dictionaries(st.tuples(KINDS, NAMES), values(), max_size=4)
    return st.lists(step, min_size=1, max_size=max_steps)
