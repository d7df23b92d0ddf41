"""A sparse gradient's rows (a tf.IndexedSlices as the golden keeps it: `grad/<var>/values`, an
id as often as it was looked up, and `grad/<var>/indices`), summed by index or scattered into the
variable's shape: what an optimizer applies. The reader (Step.gradient) and the comparison
(comparison/sparse.py) both read them so. numpy only; Python 3.7 syntax."""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from ..errors import TraceFormatError


def summed_rows(values: Any, indices: Any) -> Tuple[np.ndarray, np.ndarray]:
    """(sorted distinct indices, the sum of each index's rows): the gradient an optimizer applies."""
    values, indices = np.asarray(values), np.asarray(indices).reshape(-1).astype(np.int64)
    unique, where = np.unique(indices, return_inverse=True)
    rows = np.zeros((len(unique),) + values.shape[1:], dtype=values.dtype)
    np.add.at(rows, where.reshape(-1), values)
    return unique, rows


def dense(values: Any, indices: Any, shape: Tuple[int, ...]) -> np.ndarray:
    """The sparse gradient scattered into the variable's shape (rows of an index summed)."""
    unique, rows = summed_rows(values, indices)
    out = np.zeros(shape, dtype=rows.dtype)
    if len(unique) and (unique.min() < 0 or unique.max() >= shape[0]):
        raise TraceFormatError("a sparse gradient's indices %d..%d are outside its variable's %d rows"
                               % (unique.min(), unique.max(), shape[0]))
    out[unique] = rows
    return out
