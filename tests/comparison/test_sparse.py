"""Sparse gradients compared in whatever form each side holds them: the same gradient as rows in
any order, an index split over several rows, or scattered into a dense array, agrees; other ids
or other rows do not. Generated gradients (hypothesis), and traces end to end."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracekit
from tracekit.comparison import sparse

from ..support import build_golden

ROWS, WIDTH = 9, 2


@st.composite
def gradients(draw):
    """(values, indices) of a sparse gradient of a (ROWS, WIDTH) variable: ids repeat, any order."""
    count = draw(st.integers(0, 12))
    indices = np.array(draw(st.lists(st.integers(0, ROWS - 1), min_size=count, max_size=count)), np.int64)
    values = np.array(draw(st.lists(st.integers(-8, 8), min_size=count * WIDTH, max_size=count * WIDTH)),
                      np.float32).reshape(count, WIDTH) / 4
    return values, indices


def _split(values, indices, seed):
    """The same gradient as other rows: shuffled, each row split in two halves under its id."""
    order = np.random.RandomState(seed).permutation(len(indices))
    values, indices = values[order], indices[order]
    return np.concatenate([values / 2, values / 2]), np.concatenate([indices, indices])


@settings(max_examples=200, deadline=None)
@given(gradients(), st.integers(0, 2 ** 16))
def test_the_same_gradient_in_any_form_agrees(gradient, seed):
    values, indices = gradient
    dense = np.zeros((ROWS, WIDTH), np.float32)
    np.add.at(dense, indices, values)
    assert np.array_equal(sparse.dense(values, indices, (ROWS, WIDTH)), dense)
    other = _split(values, indices, seed)
    unique, rows = sparse.summed_rows(*other)
    assert np.array_equal(unique, np.unique(indices)) and np.array_equal(rows, dense[unique])
    golden, actual = sparse.on_union(sparse.summed_rows(values, indices), (unique, rows))
    assert np.array_equal(golden, actual)


@settings(max_examples=200, deadline=None)
@given(gradients(), gradients())
def test_rows_on_the_union_are_the_dense_gradients_rows(a, b):
    dense_a, dense_b = sparse.dense(*a, (ROWS, WIDTH)), sparse.dense(*b, (ROWS, WIDTH))
    rows_a, rows_b = sparse.on_union(sparse.summed_rows(*a), sparse.summed_rows(*b))
    union = np.union1d(a[1], b[1])
    assert np.array_equal(rows_a, dense_a[union]) and np.array_equal(rows_b, dense_b[union])


def test_indices_outside_the_variable_are_an_error():
    with pytest.raises(tracekit.TracekitError, match="outside its variable's 9 rows"):
        sparse.dense(np.ones((1, WIDTH), np.float32), np.array([9]), (ROWS, WIDTH))


def _trace(path, form, values, indices):
    def steps():
        for _ in range(2):
            step = {"loss/loss": np.float32(1.0), "var/emb:0": np.ones((ROWS, WIDTH), np.float32)}
            if form == "dense":
                step["grad/emb:0"] = sparse.dense(values, indices, (ROWS, WIDTH))
            else:
                step.update({"grad/emb:0/values": values, "grad/emb:0/indices": indices})
            yield step
    return build_golden(str(path), steps())


GOLDEN = (np.array([[1.0, 2.0], [0.5, 0.5], [3.0, -1.0]], np.float32), np.array([4, 1, 4], np.int64))


@pytest.mark.parametrize("golden_form, actual_form, form", [
    ("sparse", "sparse", sparse.BY_ROWS), ("sparse", "dense", sparse.DENSIFIED),
    ("dense", "sparse", sparse.DENSIFIED_GOLDEN_DENSE)])
def test_traces_compare_a_gradient_in_either_form(tmp_path, golden_form, actual_form, form):
    golden = _trace(tmp_path / "golden.h5", golden_form, *GOLDEN)
    same = _trace(tmp_path / "same.h5", actual_form, *_split(*GOLDEN, seed=1))
    result = tracekit.compare(golden, same)
    assert result.ok and not result.missing, result.report()
    assert result.tensor("grad", "emb:0").form == form and "compared in another form" in result.report()
    wrong_rows = (GOLDEN[0], np.array([4, 2, 4], np.int64))  # one row's id differs
    result = tracekit.compare(golden, _trace(tmp_path / "wrong.h5", actual_form, *wrong_rows))
    first = result.first_divergence
    assert not result.ok and first.step == 0 and first.name.startswith("emb:0"), result.report()
