"""Digests made by TensorFlow where the values are: the ops that compute what store/digest.py
keeps of a tensor (golden format 3), so that only the digest leaves TensorFlow, not the tensor.
The recorder adds them to a TF 1.15 graph (record/graph_digests.py); a replay runs them in a
tf.function over the port's state (tf2/capture.py).

For a float tensor of a known shape and at least SMALLEST elements: the sum and the sum of
squares accumulated in the tensor's precision over rows of BLOCK elements (reduce_sum and
TensorFlow's fused Euclidean norm, no temporary copy of the tensor), then over the rows in
float64; min and max; and the sample, gathered at digest.positions. Any summation order of
BLOCK terms errs by at most (BLOCK - 1) units of round-off of their sum of |x|, so the digest
states roundoff = (BLOCK + 3) * u + (rows + tail + 2) * 2**-53 (u: the unit round-off of the
accumulation; one u more for the square roots and squares, one for underflow) and a comparison
adds it to its bounds. Where a sum is not finite (a NaN or an Inf, or squares beyond float32)
or the squares underflow, a tf.cond takes the careful branch instead: every statistic in
float64 over the finite elements, with the NaN and Inf counts, as a digest made in numpy has
them. Anything else (integers, which keep a crc32; small or unknown shapes; tensors inside
control flow) is fetched and digested in numpy. Python 3.7 syntax.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np

from .store.digest import Digest, digest, from_statistics, positions

BLOCK = 128  # elements a row accumulates in the tensor's precision
SMALLEST = 1 << 14  # smaller tensors are fetched: their copy costs less than the ops
_UNIT = {"float16": 2.0 ** -24, "bfloat16": 2.0 ** -24, "float32": 2.0 ** -24, "float64": 2.0 ** -53}


@dataclass(frozen=True)
class Made:
    """The ops of one tensor's digest: `stats` (float64: sum, sumsq, min, max, NaN count, Inf
    count, 1.0 where the careful branch made them) and `sample`. Made without the careful
    branch (`careful` False), a digest whose quick statistics cannot stand is None: the caller
    reads the value instead."""

    stats: Any
    sample: Any
    shape: Tuple[int, ...]
    dtype: str
    roundoff: float
    careful: bool = True
    tiny: float = 0.0  # the sum of squares below which they may have underflowed

    @property
    def count(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def digest(self, stats: Any, sample: Any) -> Optional[Digest]:
        stats = np.asarray(stats, dtype=np.float64)
        if not self.careful and not _quick_enough(stats[0], stats[1], stats[2], stats[3], self.tiny):
            return None
        careful = bool(stats[6])
        roundoff = (self.count + 2) * 2.0 ** -53 if careful else self.roundoff
        return from_statistics(self.shape, self.dtype, stats[:6], sample, roundoff)


def _quick_enough(total: float, squares: float, low: float, high: float, tiny: float) -> bool:
    """Whether sums made in the tensor's precision stand: both finite (no NaN, no Inf, no square
    beyond the precision), and no square lost to underflow: their sum at least `tiny` (count
    times the smallest normal), unless every element is 0. _statistics' tf.cond asks the same."""
    return bool(abs(total) < np.inf and squares < np.inf and (squares >= tiny or low == high == 0))


def digest_ops(tf: Any, tensor: Any, careful: bool = True) -> Optional[Made]:
    """The ops of `tensor`'s digest (a variable: of its value when they run), in the graph being
    built; None where it is fetched and digested in numpy instead (see the module). Without the
    `careful` branch (a third of the ops, most of the time building them), a digest whose quick
    statistics do not stand is None (Made.digest): for a variable, which can be read again."""
    value = tensor if isinstance(tensor, tf.Tensor) else None
    if value is None:  # a variable: its value when the digest runs
        value = tf.identity(tensor)
    if not made_here(value):
        return None
    dtype = value.dtype.base_dtype
    shape = tuple(int(d) for d in value.shape.as_list())
    count = int(np.prod(shape, dtype=np.int64))
    with tf.device(value.device or None):
        stats = _statistics(tf, value, count, careful)
        sample = tf.gather(tf.reshape(value, [-1]), tf.constant(positions(count)))
    unit = _UNIT.get(dtype.name, 2.0 ** -24)
    rows = count // BLOCK
    roundoff = (BLOCK + 3) * unit + (rows + count % BLOCK + 2) * 2.0 ** -53
    tiny = float(np.finfo(np.float64 if dtype.name == "float64" else np.float32).tiny) * count
    return Made(stats, sample, shape, np.dtype(dtype.as_numpy_dtype).name, roundoff, careful, tiny)


def made_here(value: Any) -> bool:
    """Whether digest_ops makes a digest of the tensor `value` (see the module)."""
    if not value.dtype.base_dtype.is_floating or not value.shape.is_fully_defined() or \
            getattr(value.op, "_control_flow_context", None) is not None:
        return False
    return int(np.prod(value.shape.as_list(), dtype=np.int64)) >= SMALLEST


def _statistics(tf: Any, value: Any, count: int, careful_branch: bool) -> Any:
    f64 = tf.float64
    flat = tf.reshape(value, [-1])
    if flat.dtype.base_dtype not in (tf.float32, tf.float64):
        flat = tf.cast(flat, tf.float32)  # exact: float16 and bfloat16 values are float32 values
    rows = count // BLOCK
    block = tf.reshape(flat[:rows * BLOCK], [rows, BLOCK])  # a leading slice: no copy
    total = tf.reduce_sum(tf.cast(tf.reduce_sum(block, axis=1), f64))
    norms = tf.cast(tf.math.reduce_euclidean_norm(block, axis=1), f64)
    squares = tf.reduce_sum(norms * norms)
    if count % BLOCK:
        tail = tf.cast(flat[rows * BLOCK:], f64)
        total += tf.reduce_sum(tail)
        squares += tf.reduce_sum(tail * tail)
    low, high = tf.cast(tf.reduce_min(flat), f64), tf.cast(tf.reduce_max(flat), f64)
    zero = tf.constant(0.0, f64)
    quick = tf.stack([total, squares, low, high, zero, zero, zero])
    if not careful_branch:
        return quick

    def careful() -> Any:
        # Nothing here may be a constant as large as the tensor: the graph optimizer would fold
        # it into the graph, at the tensor's size in float64.
        wide = tf.cast(flat, f64)
        finite = tf.math.is_finite(wide)
        kept = tf.boolean_mask(wide, finite)
        nan = tf.reduce_sum(tf.cast(tf.math.is_nan(wide), f64))
        inf = float(count) - tf.cast(tf.size(kept), f64) - nan
        return tf.stack([tf.reduce_sum(kept), tf.reduce_sum(kept * kept), tf.reduce_min(kept), tf.reduce_max(kept),
                         nan, inf, tf.constant(1.0, f64)])

    # Squares below float32's (or float64's) smallest normal lose their bits to underflow, which
    # no relative bound covers: a tensor whose squares sum to less than that per element takes
    # the careful branch too, unless it is all zeros (exact either way).
    tiny = float(np.finfo(flat.dtype.base_dtype.as_numpy_dtype).tiny) * count
    finite = tf.logical_and(tf.less(tf.abs(total), np.inf), tf.less(squares, np.inf))
    kept = tf.logical_or(squares >= tiny, tf.logical_and(tf.equal(low, 0.0), tf.equal(high, 0.0)))
    return tf.cond(tf.logical_and(finite, kept), lambda: tf.identity(quick), careful)


def disagreement(made: Digest, value: Any) -> Optional[str]:
    """Why a digest made by these ops is not the digest numpy makes of the same value (its sample,
    NaN and Inf counts, min and max equal; each sum within the round-off it states), or None."""
    want = digest(value, crc=False)
    if made.sample.tobytes() != want.sample.tobytes() or (made.nan, made.inf) != (want.nan, want.inf):
        return "its sample or its NaN and Inf counts differ from the value's"
    if want.count - want.nonfinite and (made.min, made.max) != (want.min, want.max):
        return "min and max %r, %r; the value's %r, %r" % (made.min, made.max, want.min, want.max)
    for name, got, exact, scale in (("sum", made.sum, want.sum, want.sumabs), ("sum of squares", made.sumsq, want.sumsq,
                                                                           want.sumsq)):
        if abs(got - exact) > made.roundoff * scale + 1e-9 * scale:
            return "its %s %r is beyond the round-off it states (%.3g) of the value's %r" % (name, got, made.roundoff,
                                                                                              exact)
    return None
