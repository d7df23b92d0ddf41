"""Sparse gradients: rows of a variable's gradient and their indices (a tf.IndexedSlices).

TF1 records the gradient of an embedding table or a sparse feature's weights as it reaches
its update op: `grad/<var>/values` (one row per looked-up id, an id as often as it occurs)
and `grad/<var>/indices`. A port may hand its optimizer the same kind of gradient (Keras
`Embedding`) or a dense one (a one-hot input to `Dense`): the same gradient in another form.
Both sides are compared in one form, named with the result:
- both sparse: the distinct indices, exactly (`grad/<var>/indices`: ids that differ are never
  round-off), and the rows by index, the rows of an index summed on each side (what an
  optimizer applies), over the union of indices (a row only one side has is zero on the other);
- one side dense: the sparse side scattered into the variable's shape, then element by element.
No TensorFlow here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Dict, FrozenSet, Iterable, Mapping, Optional, Set, Tuple

import numpy as np

from ..keys import SPARSE_INDICES, SPARSE_VALUES, make_key, split_key
from ..store.rows import dense, summed_rows  # noqa: F401  # the comparison's, kept in store for the reader

VALUES, INDICES = SPARSE_VALUES, SPARSE_INDICES
BY_ROWS = "rows by index (both sparse, the rows of an index summed)"
INDEX_SET = "distinct indices (both sparse)"
DENSIFIED = "densified (golden sparse, replay dense)"
DENSIFIED_GOLDEN_DENSE = "densified (golden dense, replay sparse)"


@dataclass(frozen=True)
class SparsePair:
    """How one variable's gradient is compared: under `key` ("grad/<var>"), in `form`."""

    key: str
    form: str
    golden: Tuple[str, ...]  # the golden's key(s) of it: "grad/<var>", or its values and indices
    actual: Tuple[str, ...]  # the replay's


def _sparse(keys: Collection[str]) -> Dict[str, Tuple[str, str]]:
    """grad/<var> -> (values key, indices key) of each sparse gradient among `keys`."""
    out = {}
    for key in keys:
        kind, name = split_key(key)
        if kind == "grad" and name.endswith(VALUES):
            dense = make_key("grad", name[:-len(VALUES)])
            if dense + INDICES in keys:
                out[dense] = (key, dense + INDICES)
    return out


def pairs(golden: Collection[str], actual: Collection[str]) -> Dict[str, SparsePair]:
    """The gradients whose form is sparse on some side, and how each is compared; keyed by every
    golden key it covers."""
    g_sparse, a_sparse = _sparse(golden), _sparse(actual)
    out: Dict[str, SparsePair] = {}
    for key, g_keys in g_sparse.items():
        if key in a_sparse:
            pair = SparsePair(key, BY_ROWS, g_keys, a_sparse[key])
        elif key in actual:
            pair = SparsePair(key, DENSIFIED, g_keys, (key,))
        else:
            continue  # missing from the replay: reported as such, under the golden's keys
        out.update((k, pair) for k in g_keys)
    for key, a_keys in a_sparse.items():
        if key in golden and key not in g_sparse:
            out[key] = SparsePair(key, DENSIFIED_GOLDEN_DENSE, (key,), a_keys)
    return out


def on_union(golden: Tuple[np.ndarray, np.ndarray], actual: Tuple[np.ndarray, np.ndarray]
             ) -> Tuple[np.ndarray, np.ndarray]:
    """Two sides' (indices, summed rows) as rows over the union of their indices, zero where a
    side has no row: arrays of one shape, row k of each being the same index."""
    union = np.union1d(golden[0], actual[0])
    out = []
    for indices, rows in (golden, actual):
        full = np.zeros((len(union),) + rows.shape[1:], dtype=rows.dtype)
        full[np.searchsorted(union, indices)] = rows
        out.append(full)
    return out[0], out[1]


def values(pair: SparsePair, golden: Any, actual: Any, shape: Optional[Tuple[int, ...]],
           indices: bool = False) -> Tuple[Any, Any]:
    """The two sides of `pair` in its form; `golden`/`actual` map keys to values; `shape`: the
    variable's (for a densified side); `indices`: the distinct indices of a pair both sides
    hold sparse, instead of its rows."""
    g = [golden[k] for k in pair.golden]
    a = [actual[k] for k in pair.actual]
    if pair.form == BY_ROWS:
        g_rows, a_rows = summed_rows(*g), summed_rows(*a)
        return (g_rows[0], a_rows[0]) if indices else on_union(g_rows, a_rows)
    if pair.form == DENSIFIED:
        return dense(g[0], g[1], tuple(shape) if shape else np.shape(a[0])), a[0]
    return g[0], dense(a[0], a[1], np.shape(g[0]))


@dataclass(frozen=True)
class SparseRows:
    """A variable's sparse gradient at one step: the rows TF1's names (the golden's indices) and
    the indices some side holds more than once."""

    named: FrozenSet[int]
    repeated: FrozenSet[int]


def rows(found: Iterable[SparsePair], golden: Mapping[str, Any], actual: Mapping[str, Any]) -> Dict[str, SparseRows]:
    """{variable: its SparseRows} at one step, for each gradient sparse on the golden's side: what
    tells an optimizer that applies rows one at a time, or updates rows no index names, from TF1's."""
    out: Dict[str, SparseRows] = {}
    for pair in found:
        if len(pair.golden) != 2 or pair.golden[1] not in golden:
            continue
        named = np.asarray(golden[pair.golden[1]]).ravel()
        repeated: Set[int] = set()
        for keys, values in ((pair.golden, golden), (pair.actual, actual)):
            if len(keys) == 2 and keys[1] in values:
                ids, counts = np.unique(np.asarray(values[keys[1]]).ravel(), return_counts=True)
                repeated.update(int(i) for i in ids[counts > 1])
        out[split_key(pair.key)[1]] = SparseRows(frozenset(int(i) for i in named), frozenset(repeated))
    return out
