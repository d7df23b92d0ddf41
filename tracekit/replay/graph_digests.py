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

from ..digest_ops import digest_ops, disagreement, made_here
from ..store.digest import positions
from .tf_import import tf

LOG = logging.getLogger(__name__)
CAPACITY = 4096  # keys with a mode; any beyond are sent as values
VALUE, DIGEST, BOTH = 0, 1, 2

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
        mode = self._modes[place]
        shape = tuple(int(d) for d in value.shape.as_list())
        count = int(np.prod(shape, dtype=np.int64))
        flat = tf.reshape(value, [-1])
        made: List[Any] = []

        def digested() -> Any:
            made.append(digest_ops(tf, value))
            return made[-1].stats, made[-1].sample

        def nothing() -> Any:
            return tf.zeros([7], tf.float64), tf.zeros([len(positions(count))], value.dtype)
        sent_value = tf.cond(tf.equal(mode, DIGEST), lambda: tf.zeros([0], value.dtype), lambda: tf.identity(flat))
        stats, sample = tf.cond(tf.equal(mode, VALUE), nothing, digested)

        def read(arrays: List[np.ndarray]) -> Any:
            found, kept = int(self._current[place]), made[-1]  # made[-1]: the branch as last traced
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
