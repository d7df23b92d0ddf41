"""Round-off arithmetic of the update audit (rerun.py, claims.py), a block at a time.

The audit holds re-executed variables and slots against recorded ones element by element, in
ulps of each element's scale. Done on whole tensors in float64, that is a dozen temporaries
eight bytes an element: at BERT-base's size (110M parameters, two slots each) several GB and
most of a recording's fixed cost. Here every judgment walks aligned flat blocks of BLOCK
elements, whose float64 temporaries stay in cache, and keeps only what it reduces to (a
maximum and where, whether anything moved, a sum). The results are those of the whole-array
formulas: each is elementwise, then reduced by max, any or a sum (a sum's order differs, it
only words a message). Python 3.7 syntax.
"""

from __future__ import annotations

from typing import Any, Iterator, List, Optional, Sequence, Tuple

import numpy as np

BLOCK = 1 << 16  # elements: 512 KB a float64 temporary


def float_type(array: Any) -> np.dtype:
    """The float type an array's ulps are counted in: its own, float32 for integers."""
    dtype = np.asarray(array).dtype
    return dtype if dtype.kind == "f" else np.dtype(np.float32)


def blocks(*arrays: Any) -> Iterator[Tuple[int, List[Optional[np.ndarray]]]]:
    """(offset, aligned flat blocks) of arrays shaped like the first; None, or an array of
    another shape, gives None blocks. One block for an empty first array."""
    first = np.asarray(arrays[0])
    flats = [None if a is None or np.shape(a) != first.shape else np.asarray(a).reshape(-1) for a in arrays]
    for start in range(0, max(first.size, 1), BLOCK):
        yield start, [None if f is None else f[start:start + BLOCK] for f in flats]


def ulps_of(*arrays: Any, floor: float = 0.0, dtype: Optional[np.dtype] = None) -> np.ndarray:
    """One ulp of each element's scale: its largest finite magnitude among `arrays` (None and
    other shapes skipped; at least `floor`), in `dtype` (else the first one's float type), as
    float64. For a block, or an array small enough to hold in float64."""
    first = np.asarray(arrays[0])
    dtype = float_type(first) if dtype is None else dtype
    present = [np.asarray(a) for a in arrays if a is not None and np.shape(a) == first.shape]
    if dtype == np.float32 and present and all(a.dtype == np.float32 for a in present):
        # float32 throughout: the largest magnitude is exact in float32, and found there at a
        # third of the cost; an Inf (or NaN everywhere) takes the float64 way below
        scale32 = np.abs(present[0])
        for array in present[1:]:
            np.fmax(scale32, np.abs(array), out=scale32)
        if floor:
            np.fmax(scale32, np.float32(floor), out=scale32)
        if np.isfinite(scale32).all():
            return np.spacing(scale32).astype(np.float64) + float(np.finfo(dtype).tiny)
    scale = np.full(first.shape, floor, np.float64)
    with np.errstate(all="ignore"):
        for array in arrays:
            if array is not None and np.shape(array) == first.shape:
                value = np.abs(np.asarray(array, np.float64))
                scale = np.fmax(scale, np.where(np.isfinite(value), value, 0.0))
    return np.spacing(scale.astype(dtype)).astype(np.float64) + float(np.finfo(dtype).tiny)


def compare(recorded: Any, got: Any, before: Any = None) -> Tuple[float, float, str]:
    """(the largest error in ulps of its element's scale, the largest absolute error, where it is
    with both values) of a re-executed tensor against the recorded one."""
    rec, new = np.asarray(recorded), np.asarray(got)
    if rec.shape != new.shape:
        return float("inf"), float("inf"), "of shape %s where the step recorded %s" % (new.shape, rec.shape)
    if not rec.size:
        return 0.0, 0.0, ""
    dtype = float_type(rec)
    worst, largest, at = -1.0, 0.0, 0
    for start, (r, g, b) in blocks(rec, new, before):
        if np.array_equal(r, g):  # re-executed on the recording's machine, most blocks are
            if worst < 0:
                worst, at = 0.0, start
            continue
        allow = ulps_of(r, g, b, dtype=dtype)
        a, c = r.astype(np.float64), g.astype(np.float64)
        with np.errstate(all="ignore"):
            same = (a == c) | (np.isnan(a) & np.isnan(c))
            diff = np.where(same, 0.0, np.abs(a - c))
            diff = np.where(np.isnan(diff), np.inf, diff)
            ulps = np.where(diff == 0, 0.0, diff / allow)
        i = int(np.argmax(ulps))
        if ulps[i] > worst:  # the first of the largest, as over the whole tensor
            worst, at = float(ulps[i]), start + i
        largest = max(largest, float(np.max(diff)))
    index = [int(j) for j in np.unravel_index(at, rec.shape)] if rec.ndim else None
    where = "%s%r where the step recorded %r" % ("" if index is None else "at %s: " % index,
                                                 float(new.reshape(-1)[at]), float(rec.reshape(-1)[at]))
    return worst, largest, where


def moved(a: Any, b: Any, scales: Sequence[Any], times: float = 4.0) -> bool:
    """Whether `b` differs from `a` beyond `times` ulps of scale (the largest magnitude among
    `scales`, elementwise) anywhere."""
    dtype = float_type(scales[0])
    for _, (x, y, *s) in blocks(a, b, *scales):
        if np.array_equal(x, y):
            continue
        allow = ulps_of(*s, dtype=dtype)
        with np.errstate(all="ignore"):
            if np.any(~(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64)) <= times * allow)):
                return True
    return False
