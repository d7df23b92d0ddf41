"""Perturbed steps: the drift envelope's replays (tf2/verdict.py) move a TF2 port's variables
after every step, and its gradients, as one TensorFlow function each (the perturbed start every
framework shares is replay/perturb.py's). Zeros stay; bfloat16 stays (no numpy eps)."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

import numpy as np



# A tensor larger than this takes its draws from a block of this many, repeated: a fresh draw per
# element cost about as much as the step on a large model (BERT-base: 110M values, twice a step).
# Each element still moves by a uniform draw; elements BLOCK apart move alike. Prime, so the repeat
# falls along no row or column of a power-of-two shape; tensors up to it draw as before.
BLOCK = 65521


def _move(tf: Any, value: Any, seed: Any) -> Any:
    """How far `value` moves: up to one eps of its largest magnitude, uniformly, either way, from
    `seed` (two int64), by the raw stateless op (the random tape, which feeds a step's own draws,
    does not see it). The scale is applied to the draws before any repeat, so a large tensor
    pays one pass to place its moves, not three (the values are those of scaling it after)."""
    scale = tf.reduce_max(tf.abs(value)) * float(np.finfo(value.dtype.as_numpy_dtype).eps)
    size = value.shape.num_elements()
    if size is None or size <= BLOCK:  # unknown until run (a sparse gradient's rows): whole
        draw = tf.raw_ops.StatelessRandomUniform(shape=tf.shape(value), seed=seed, dtype=value.dtype)
        return (draw * 2.0 - 1.0) * scale
    block = tf.raw_ops.StatelessRandomUniform(shape=[BLOCK], seed=seed, dtype=value.dtype)
    return tf.reshape(tf.tile((block * 2.0 - 1.0) * scale, [-(-size // BLOCK)])[:size], value.shape)


def _floating(tf: Any, dtype: Any) -> bool:
    return dtype in (tf.float16, tf.float32, tf.float64)  # not bfloat16: numpy has no eps for it


class Jitter:
    """move(variables, seed, by_scale=True) after every step of a drift replay, as one
    TensorFlow function over the float variables (its own draws, stateless from the seed; zeros
    stay): read out to numpy and back, the move cost as much as the step it follows."""

    def __init__(self, variables: Sequence[Any]) -> None:
        import tensorflow as tf

        floats = [v for v in variables if _floating(tf, v.dtype)]

        @tf.function
        def jitter(seed: Any) -> None:
            for i, variable in enumerate(floats):
                value = variable.read_value()
                moves = _move(tf, value, tf.stack([seed, tf.constant(i, tf.int64)]))
                # added in place; a zero gets -0.0, which leaves any zero (and its sign) as it is
                variable.assign_add(tf.where(tf.equal(value, 0), tf.constant(-0.0, value.dtype), moves))

        self._jitter: Optional[Callable[[Any], None]] = jitter if floats else None
        self._tf = tf

    def __call__(self, seed: int) -> None:
        if self._jitter is not None:
            self._jitter(self._tf.constant(seed, self._tf.int64))


class GradientJitter:
    """Each gradient a step takes (GradientWatch) moved by up to one eps of its tensor's scale,
    uniformly, at random, for a drift replay: TF 1.15's and TF 2's kernels round every
    activation and gradient otherwise, not only the state, and replays moved in their variables
    alone spread less than the two frameworks do (an Adam update flips on a gradient at the noise
    floor). Seeded by `seed` and a counter the runner advances after each step."""

    def __init__(self, seed: int) -> None:
        import tensorflow as tf

        self._tf, self._seed = tf, seed
        self._counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="tracekit_jitter_step")

    def __call__(self, grads: Sequence[Any]) -> List[Any]:
        tf = self._tf
        out = []
        for i, grad in enumerate(grads):
            values = grad.values if isinstance(grad, tf.IndexedSlices) else grad
            if values is None or not _floating(tf, values.dtype):
                out.append(grad)
                continue
            seed = tf.stack([self._counter.read_value() * 1_000_003 + self._seed, tf.constant(i, tf.int64)])
            moved = values + _move(tf, values, seed)
            out.append(tf.IndexedSlices(moved, grad.indices, grad.dense_shape)
                       if isinstance(grad, tf.IndexedSlices) else moved)
        return out

    def step(self) -> None:
        self._counter.assign_add(1)
