"""A step's captured tensors digested in the port's tf.function (digest_ops.py), so that at the
steps where the golden keeps only a gradient's digest, only the digest leaves TensorFlow.

Each captured key that can be digested there gets a place in a vector of modes the capture
sets before every step: 0 sends the value, 1 the digest alone, 2 both. A key is digested only
at a step where the golden keeps its digest (for a key named only after the step, such as a
gradient a hand-written optimizer takes, a digest under every key it may become), and only once
a step that sent both found every digest made there equal to numpy's of its value
(digest_ops.disagreement); where one is not, none are made there again (logged) and values are
sent, which the replay digests in numpy.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Collection, Dict, List, Optional, Tuple

import numpy as np

from ..digest_ops import Made, digest_ops, disagreement, made_here
from ..store.digest import positions
from .tf_import import tf

LOG = logging.getLogger(__name__)
CAPACITY = 4096  # keys with a mode; any beyond are sent as values
VALUE, DIGEST, BOTH = 0, 1, 2

# One tf.function per shape and dtype (and kind), traced once per process and called from every
# traced step that digests such a tensor: one call op there. Built inline, a digest's ops and
# conditionals took ~50 ms of tracing per tensor (about 8 s of a BERT-base replay's first step).
# Nothing in them is a tensor's own: what a digest states (Made) follows from shape and dtype.
_CALLS: Dict[Tuple[str, Tuple[int, ...], str], Tuple[Any, Made]] = {}

# What arrives of one key (the arrays its side op sent) -> its value or Digest
Reader = Callable[[List[np.ndarray]], Any]


class GraphDigests:
    """The modes of the keys a capture may digest in the graph, and the check of the first."""

    def __init__(self) -> None:
        self._modes = tf.Variable(tf.zeros([CAPACITY], tf.int32), trainable=False, name="tracekit_capture_digests")
        self._current = np.zeros(CAPACITY, np.int32)  # the modes of the step that runs
        self._index: Dict[str, int] = {}
        self._becomes: Dict[str, Tuple[str, ...]] = {}  # a key named after the step -> the golden keys it may be
        self.checked = False  # a step sending values and digests found them to agree
        self.unusable: Optional[str] = None  # why digests are no longer made here

    def plan(self, digested: Collection[str]) -> None:
        """Before a step: the keys whose digest the golden keeps at this step (`digested`) are
        sent as digests, or as both where none has been checked yet."""
        modes = np.zeros(CAPACITY, np.int32)
        if self.unusable is None:
            wanted = set(digested)
            mode = DIGEST if self.checked else BOTH
            for key in wanted:
                if key in self._index:
                    modes[self._index[key]] = mode
            for key, golden in self._becomes.items():
                if wanted.issuperset(golden):
                    modes[self._index[key]] = mode
        if not np.array_equal(modes, self._current):
            self._modes.assign(modes)
            self._current = modes

    def sent(self, key: str, tensor: Any, becomes: Tuple[str, ...] = ()) -> Optional[Tuple[List[Any], Reader]]:
        """While tracing: the tensors to send for `key` (value, statistics, sample, each a
        placeholder of no size where its mode does not send it) and the reader of what arrives;
        None where the value is sent as it is (no digest can be made here, or no place left).
        `becomes`: the golden keys a key named only after the step may become (all digested at
        a step, or it is sent whole)."""
        value = tf.convert_to_tensor(tensor)
        if not made_here(value) or (key not in self._index and len(self._index) >= CAPACITY):
            return None
        place = self._index.setdefault(key, len(self._index))
        if becomes:
            self._becomes[key] = tuple(becomes)
        shape = tuple(int(d) for d in value.shape.as_list())
        send, kept = sending(shape, value.dtype.base_dtype)
        sent_value, stats, sample = send(value, self._modes[place])

        def read(arrays: List[np.ndarray]) -> Any:
            found = int(self._current[place])
            if found == VALUE:
                return arrays[0].reshape(shape)
            digest = kept.digest(arrays[1], arrays[2])
            if found == DIGEST:
                return digest
            self._check(key, digest, arrays[0].reshape(shape))
            return arrays[0].reshape(shape)
        return [sent_value, stats, sample], read

    def _check(self, key: str, made: Any, value: np.ndarray) -> None:
        why = disagreement(made, value)
        if why is None:
            self.checked = self.unusable is None
            return
        self.checked, self.unusable = False, "%s: %s" % (key, why)
        LOG.warning("the port's captured tensors are digested in numpy from here on, not in TensorFlow: %s",
                    self.unusable)


def sending(shape: Tuple[int, ...], dtype: Any) -> Tuple[Any, Made]:
    """The function send(value, mode) -> (the value flattened, or a placeholder of no size where
    `mode` is DIGEST; the digest's statistics and sample, or zeros where it is VALUE), and what
    the digest it makes states."""
    key = ("sent", shape, dtype.name)
    if key not in _CALLS:
        count = int(np.prod(shape, dtype=np.int64))
        made: List[Made] = []

        def send(value: Any, mode: Any) -> Any:
            def digested() -> Any:
                made.append(digest_ops(tf, value))
                return made[-1].stats, made[-1].sample

            def nothing() -> Any:
                return tf.zeros([7], tf.float64), tf.zeros([len(positions(count))], value.dtype)
            flat = tf.reshape(value, [-1])
            sent_value = tf.cond(tf.equal(mode, DIGEST), lambda: tf.zeros([0], value.dtype), lambda: tf.identity(flat))
            stats, sample = tf.cond(tf.equal(mode, VALUE), nothing, digested)
            return sent_value, stats, sample
        _CALLS[key] = (_traced(send, shape, dtype, tf.TensorSpec([], tf.int32)), made[-1])
    return _CALLS[key]


def digesting(shape: Tuple[int, ...], dtype: Any) -> Tuple[Any, Made]:
    """The function digest(value) -> (statistics, sample) without the careful branch (of a
    variable, which can be read again where they do not stand: digest_ops), and what the
    digest states; for a tensor digest_ops.made_here takes."""
    key = ("quick", shape, dtype.name)
    if key not in _CALLS:
        made: List[Made] = []

        def digest(value: Any) -> Any:
            ops = digest_ops(tf, value, careful=False)
            assert ops is not None, "digesting() of a tensor made_here() does not take"
            made.append(ops)
            return ops.stats, ops.sample
        _CALLS[key] = (_traced(digest, shape, dtype), made[-1])
    return _CALLS[key]


def _traced(body: Callable[..., Any], shape: Tuple[int, ...], dtype: Any, *more: Any) -> Any:
    function = tf.function(body, input_signature=[tf.TensorSpec(shape, dtype), *more], autograph=False)
    with tf.init_scope():  # traced apart from the step being traced: none of its device or control scopes
        function.get_concrete_function()
    return function
