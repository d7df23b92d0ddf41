"""The random tape: TF2's random ops draw what the golden recorded, in order.

The random functions behind dropout and friends (`tf.random.*`, stateful and
stateless) are replaced for the length of a step. With random="tape" each draw is
the golden's next recorded draw; otherwise TF2's own draw is kept and recorded, in the
form the golden holds (the random op's output, before minval/maxval or mean/stddev).
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ..errors import ReplayError
from ..replay.patched import patched
from .capture import Capture, weakly
from .distribute import Distribution, replica_id
from .tf_import import tf
from tensorflow.python.ops import random_ops, stateless_random_ops  # noqa: E402  (after tf_import)

RANDOM_FUNCTIONS = [
    (random_ops, "random_uniform"), (random_ops, "random_normal"), (random_ops, "truncated_normal"),
    (stateless_random_ops, "stateless_random_uniform"), (stateless_random_ops, "stateless_random_normal"),
    (stateless_random_ops, "stateless_truncated_normal"),
]

# The arguments that make each function return its random op's output unchanged.
STANDARD = {name: ({"minval": 0, "maxval": None} if "uniform" in name else {"mean": 0.0, "stddev": 1.0})
            for _, name in RANDOM_FUNCTIONS}

_ALIASES: Dict[Tuple[str, str], List[Tuple[Any, str]]] = {}


def _random_aliases(module: Any, name: str) -> List[Tuple[Any, str]]:
    """Where a random function can be reached: its module (what TF's own ops call) and the
    public API names bound to the same function object (tf.random.uniform, ...)."""
    key = (module.__name__, name)
    if key not in _ALIASES:
        original = getattr(module, name)
        found = [(module, name)]
        for api in (tf.random, tf.compat.v1, tf.compat.v1.random, tf.compat.v2.random):
            found.extend((api, attr) for attr in dir(api) if getattr(api, attr, None) is original)
        _ALIASES[key] = found
    return _ALIASES[key]


def _affine(fname: str, call: Dict[str, Any], dtype: Any, raw: Any) -> Any:
    """What the TF random function returns for its random op's output `raw`. The golden
    holds the op's own output (uniform in [0, 1), standard normal); the function maps it,
    in the same float ops on TF 1.15 and 2.x, to [minval, maxval) or to mean + stddev * x."""
    if not dtype.is_floating:
        return raw  # integer draws come out of their op final
    if "uniform" in fname:
        maxval = 1 if call["maxval"] is None else call["maxval"]
        if isinstance(call["minval"], int) and call["minval"] == 0 and isinstance(maxval, int) and maxval == 1:
            return raw
        low, high = tf.cast(call["minval"], dtype), tf.cast(maxval, dtype)
        return tf.add(raw * (high - low), low)
    return tf.add(raw * tf.cast(call["stddev"], dtype), tf.cast(call["mean"], dtype))


def _same(value: np.ndarray) -> np.ndarray:
    return value


def _static_shape(shape: Any) -> Any:
    try:
        return tf.TensorShape(tf.get_static_value(tf.convert_to_tensor(shape)))
    except (TypeError, ValueError):
        return tf.TensorShape(None)


class RandomTape:
    """One replay's random draws: `inject` is True for random="tape". Under a strategy each
    replica draws the whole tape in order, each draw sliced to the rows the replica got."""

    def __init__(self, capture: Capture, inject: bool, pass_through: bool = False,
                 distribution: Optional[Distribution] = None) -> None:
        self.capture = capture
        self.inject = inject
        # TF2's own draws pass through a numpy function, as a taped draw would (see draw()): for
        # a run that a golden is made of (tracekit.tf2.derive), never for a replay.
        self.pass_through = pass_through and not inject
        self.distribution = distribution
        self._tape: List[Tuple[str, np.ndarray]] = []
        self._pos: Dict[Optional[int], int] = {}  # replica id (None: no strategy) -> draws taken
        self._step = 0
        self.error: Optional[ReplayError] = None  # raised inside a tf.function's numpy op
        # golden draw -> [its shape, the port's]: draws fed reshaped (same count, dtype and distribution)
        self.reshaped: Dict[str, List[List[int]]] = {}
        # golden draw -> the rate of the port's dropout that drew it (where a dropout did: _dropout_rate)
        self.rates: Dict[str, float] = {}
        # (owner, attribute, wrapper) of every name a random function is reached by: made once, installed each step
        self._wrappers: Optional[List[Tuple[Any, str, Callable[..., Any]]]] = None

    def start(self, index: int, draws: List[Tuple[str, np.ndarray]]) -> None:
        """Step `index` begins; `draws` are the golden's, in recording order."""
        self._tape, self._pos, self.error, self._step = draws, {}, None, index

    def check(self, index: int) -> None:
        """After the step: with the tape, the port (each replica) must have drawn every recorded draw."""
        if not self.inject or not self._tape:
            return  # a draw beyond the tape fails as it is made
        # Under a strategy each replica draws; under the default one (or outside strategy.run) none is.
        in_replicas = self.distribution is not None and any(r is not None for r in self._pos)
        replicas = self.distribution.local_ids if in_replicas else [None]
        for replica in replicas:
            taken = self._pos.get(replica, 0)
            if taken != len(self._tape):
                who = "the TF2 step" if replica is None else "replica %d of the TF2 step" % replica
                raise ReplayError("step %d: %s drew %d random tensors, the golden recorded %d (%s); the random "
                                  "tape injects them in order, so the port must draw as often"
                                  % (index, who, taken, len(self._tape), ", ".join(n for n, _ in self._tape)))

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """TF's random functions, under every name they are reached by, draw from the tape."""
        if self._wrappers is None:
            self._wrappers = [(owner, attr, wrapped) for module, name in RANDOM_FUNCTIONS
                              for wrapped in [self._wrap(getattr(module, name), name)]
                              for owner, attr in _random_aliases(module, name)]
        with patched(self._wrappers):
            yield

    def _wrap(self, original: Callable[..., Any], fname: str) -> Callable[..., Any]:
        tape = self
        signature = inspect.signature(original)

        def draw(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            call = bound.arguments
            dtype = tf.as_dtype(call["dtype"])
            replica = replica_id()  # fixed when traced: each replica traces its own draws
            if not tape.inject and not dtype.is_floating:
                value = original(*args, **kwargs)  # an integer draw comes out of its op final
                tape.capture.draw(value)
                return value
            if tape.inject:
                shape = tf.cast(call["shape"], tf.int64)
                rate = _dropout_rate(inspect.currentframe())  # known as the port builds the draw

                def next_draw(want: np.ndarray) -> np.ndarray:
                    return tape._next(fname, tuple(int(d) for d in np.reshape(want, [-1])), dtype, replica, rate)
                if tf.executing_eagerly():
                    raw = tf.constant(next_draw(shape.numpy()), dtype=dtype)
                else:
                    raw = tf.numpy_function(weakly(next_draw, tape.capture.held), [shape], dtype, name="tracekit_tape")
                    raw.set_shape(_static_shape(call["shape"]))
            else:  # TF2's own draw, in the form the golden holds (uniform in [0, 1) or standard normal)
                raw = original(**dict(call, **STANDARD[fname]))
                if tape.pass_through and not tf.executing_eagerly():
                    # The ops after it then form the graph a replay injecting this draw builds: TF
                    # fuses and picks kernels by the graph, and a golden made of this run must
                    # replay bit for bit (it differed by an ulp without).
                    raw = tf.numpy_function(_same, [raw], dtype, name="tracekit_tape")
                    raw.set_shape(_static_shape(call["shape"]))
            tape.capture.draw(raw)
            return _affine(fname, call, dtype, raw)
        return draw

    def _next(self, fname: str, shape: Tuple[int, ...], dtype: Any, replica: Optional[int] = None,
              rate: Optional[float] = None) -> np.ndarray:
        self.capture.check_live()
        position = self._pos.get(replica, 0)
        where = "step %d, random draw %d (%s)%s" % (self._step, position, fname,
                                                    "" if replica is None else " of replica %d" % replica)
        if position >= len(self._tape):
            self._failure("%s: the TF2 step draws more random tensors than the golden recorded (%d); use "
                          "random='seed' or 'none' if the port's randomness differs" % (where, len(self._tape)))
        name, value = self._tape[position]
        recorded = tuple(value.shape)
        if replica is not None and self.distribution is not None:
            value = self.distribution.slice_draw(value, shape, replica)
        asked, drawn = _distribution(fname), _distribution(name.rsplit("/", 1)[-1])
        if value is not None and asked is not None and drawn is not None and asked != drawn:
            self._failure("%s: the golden recorded a %s draw (%s), the TF2 step asks for a %s one; the random tape "
                          "injects draws in order, so the port must draw the same distributions in the same order"
                          % (where, drawn, name, asked))
        if value is not None and tuple(value.shape) != shape and _same_draw(name, value, fname, shape, dtype):
            # the same numbers drawn in another layout (TF1 BERT drops out a reshaped 2-D tensor)
            self.reshaped.setdefault(name, [list(recorded), list(shape)])
            value = value.reshape(shape)
        if value is None or tuple(value.shape) != shape or value.dtype.kind != np.dtype(dtype.as_numpy_dtype).kind:
            self._failure("%s: the golden recorded %s %s from %s, the TF2 step asks for %s %s; the random tape "
                          "injects draws in order, so the port must draw as many numbers of the same distribution "
                          "in the same order (a draw of another shape is fed reshaped)%s"
                          % (where, self._tape[position][1].dtype, recorded, name, dtype.name, shape,
                             "" if replica is None else " (a replica draws its rows of the global batch's draw)"))
        self._pos[replica] = position + 1
        if rate is not None:
            self.rates.setdefault(name, rate)
        return value.astype(dtype.as_numpy_dtype, copy=False)

    def _failure(self, message: str) -> None:
        # Kept: raised inside a tf.function, TF re-raises it wrapped in an op error.
        self.error = ReplayError(message)
        raise self.error


# Which distribution a draw is of: the random function asked (TF2) or the op that drew it (the golden's name).
_DISTRIBUTIONS = (("truncated", ("truncated",)), ("normal", ("normal",)), ("uniform", ("uniform",)))


def _distribution(name: str) -> Optional[str]:
    lowered = name.lower()
    for kind, marks in _DISTRIBUTIONS:  # truncated first: a truncated normal's name holds "normal" too
        if any(mark in lowered for mark in marks):
            return kind
    return None


def _dropout_rate(frame: Any, depth: int = 12) -> Optional[float]:
    """The rate of the dropout a random draw is made for: the `rate` (or `keep_prob`) a caller
    named like a dropout holds as a number (tf.nn.dropout's, Keras 2's and 3's). None where no
    caller within `depth` frames is one, or its rate is a tensor."""
    while frame is not None and depth:
        if "dropout" in frame.f_code.co_name.lower():
            names = frame.f_locals
            for key, flip in (("rate", False), ("keep_prob", True)):
                value = names.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    return 1.0 - float(value) if flip else float(value)
        frame, depth = frame.f_back, depth - 1
    return None


def _same_draw(name: str, value: np.ndarray, fname: str, shape: Tuple[int, ...], dtype: Any) -> bool:
    """Whether the golden's draw `name` holds the numbers the port asks for in another shape: as
    many, of the same dtype and distribution (both known)."""
    kind = _distribution(fname)
    return (int(np.prod(shape)) == value.size and value.dtype == np.dtype(dtype.as_numpy_dtype)
            and kind is not None and kind == _distribution(name.rsplit("/", 1)[-1]))
