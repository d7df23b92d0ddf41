"""What a TF2 step produced, as named numpy arrays, eager or inside a tf.function.

Inside a tf.function a value exists only when the traced function runs, so it is
captured by a `tf.numpy_function` side op; side ops are stateful, and tf.function
runs them in program order.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Dict, List

import numpy as np

from ..errors import ReplayError
from .distribute import replica_id
from .tf_import import tf

# Set when a capture op of an earlier replay ran: its tf.function was traced then, and
# keeps that replay's capture ops (and misses this one's variable mapping).
_stale: List[str] = []
STALE = ("the step function is a tf.function traced during an earlier replay: it still reports to that "
         "one. Pass each replay a fresh tf.function (or the plain Python function)")


def numpy(value: Any) -> np.ndarray:
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def when_run(tensor: Any, callback: Callable[[np.ndarray], None]) -> None:
    """callback(value of tensor) now when eager, else each time the traced function runs
    (a tf.numpy_function side op: stateful, so tf.function runs it in program order)."""
    if tf.executing_eagerly():
        callback(numpy(tensor))
        return

    def call(value: np.ndarray) -> np.ndarray:
        callback(np.array(value))
        return np.zeros((), np.int32)
    tf.numpy_function(call, [tensor], tf.int32, name="tracekit_capture")


class Capture:
    """What one step produced. One object for the whole replay, reset per step: a traced
    function keeps the capture ops it was traced with. Inside a strategy's replica function
    a value is kept per replica (`replicas`, `replica_draws`), until the runner joins them."""

    def __init__(self) -> None:
        self.values: "collections.OrderedDict[str, np.ndarray]" = collections.OrderedDict()
        self.draws: List[np.ndarray] = []
        self.replicas: "collections.OrderedDict[str, Dict[int, np.ndarray]]" = collections.OrderedDict()
        self.replica_draws: Dict[int, List[np.ndarray]] = {}
        self.live = False  # during a step of this capture's own replay

    def reset(self) -> None:
        self.values = collections.OrderedDict()
        self.draws = []
        self.replicas = collections.OrderedDict()
        self.replica_draws = {}
        del _stale[:]

    def put(self, key: str, tensor: Any) -> None:
        replica = replica_id()  # the replica tracing or running this code, fixed in the traced function
        if replica is None:
            when_run(tensor, self._keep(lambda value: self.values.__setitem__(key, value)))
        else:
            when_run(tensor, self._keep(lambda value: self.replicas.setdefault(key, {}).__setitem__(replica, value)))

    def draw(self, tensor: Any) -> None:
        replica = replica_id()
        if replica is None:
            when_run(tensor, self._keep(lambda value: self.draws.append(value)))  # this step's list, not the first's
        else:
            when_run(tensor, self._keep(lambda value: self.replica_draws.setdefault(replica, []).append(value)))

    def check_live(self) -> None:
        """Raise (and remember) that a stale tf.function runs, if this capture is not live."""
        if not self.live:
            _stale.append(STALE)
            raise ReplayError(STALE)

    @staticmethod
    def stale() -> "str | None":
        """Why the step failed when an earlier replay's tf.function ran, else None."""
        return _stale[0] if _stale else None

    def _keep(self, store: Callable[[np.ndarray], None]) -> Callable[[np.ndarray], None]:
        def keep(value: np.ndarray) -> None:
            if not self.live:
                _stale.append(STALE)
                return
            store(value)
        return keep
