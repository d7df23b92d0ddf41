"""What a TF2 step produced, as named numpy arrays, eager or inside a tf.function.

Inside a tf.function a value exists only when the traced function runs, so it is
captured by a `tf.numpy_function` side op; side ops are stateful, and tf.function
runs them in program order. A step captured light (a replay with every=K) needs only the
light kinds: the other side ops sit in a `tf.cond` on a variable the capture sets before each
step, so they cost no copy to the host and no Python call then, in the one trace.
"""

from __future__ import annotations

import collections
import logging
import weakref
from typing import Any, Callable, Collection, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..digest_ops import disagreement, made_here
from ..errors import StaleStep
from ..keys import LIGHT_KINDS, split_key
from ..store.digest import Digest
from .distribute import replica_id
from .graph_digests import GraphDigests, Reader, digesting
from .tf_import import tf

# Set when a capture op of an earlier replay ran: its tf.function was traced then, and
# keeps that replay's capture ops (and misses this one's variable mapping).
_stale: List[str] = []
LOG = logging.getLogger(__name__)
STALE = ("the step function is a tf.function traced during an earlier replay: it still reports to that "
         "one. Pass each replay a fresh tf.function (or the plain Python function)")


def port_grad_key(conversion: int, variable: int) -> str:
    """The capture's name for a converted port variable's gradient, until it is converted."""
    return "#conversion%d/%d" % (conversion, variable)


def passed_key(key: str) -> str:
    """The capture's name for the gradient a replica passed, beside the all-reduced one under `key`."""
    kind, _, name = key.partition("/")
    return "%s/#passed:%s" % (kind, name)


def numpy(value: Any) -> np.ndarray:
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def retained(value: Any) -> np.ndarray:
    """A value a capture keeps past its callback. A py op's argument that holds TensorFlow's own
    buffer (its base a reference to the tensor, as TF 2 passes them) is kept as a read-only view:
    the buffer lives while the view does, and no op writes into a buffer something else holds
    (an output forwarded in place, a variable's update, copies it first). Copying every
    gradient out instead cost a BERT-base check a fifth of its time. Anything else is copied."""
    if isinstance(value, np.ndarray) and not value.flags.owndata and value.base is not None:
        view = value.view()
        view.flags.writeable = False
        return view
    return np.array(value)


def weakly(func: Callable[..., Any], keep: List[Any]) -> Callable[..., Any]:
    """`func` for a TensorFlow py op, held by `keep` (a list its owner holds) and by the op only
    weakly. TensorFlow's default graph keeps every py op a traced function registers for good;
    holding the function, it would hold the replay's runner, capture and port with it, and a
    judged check, which replays a fresh port several times, would hold every one of them. Run
    after its owner is gone (an earlier replay's traced function), it says so (STALE)."""
    keep.append(func)
    ref = weakref.ref(func)

    def call(*args: Any) -> Any:
        target = ref()
        if target is None:
            _stale.append(STALE)
            raise StaleStep(STALE)
        return target(*args)
    return call


def when_run(tensors: List[Any], callback: Callable[[List[np.ndarray]], None], keep: List[Any],
             only_if: Any = None) -> None:
    """callback(values of tensors) now when eager, else each time the traced function runs: one
    tf.numpy_function side op for them all (stateful, so tf.function runs it in program order),
    and with `only_if` (a boolean variable) only in the runs where it holds. The values may
    share TensorFlow's buffers: a callback keeps one through `retained`. `keep`: the owner's list
    that holds the callback (weakly)."""
    if tf.executing_eagerly():
        callback([numpy(t) for t in tensors])
        return
    target = weakly(callback, keep)

    def call(*values: np.ndarray) -> np.ndarray:
        target(list(values))
        return np.zeros((), np.int32)

    def run() -> Any:
        return tf.numpy_function(call, list(tensors), tf.int32, name="tracekit_capture")
    if only_if is None:
        run()
    else:
        tf.cond(only_if, run, lambda: tf.constant(0, tf.int32))


class Capture:
    """What one step produced. One object for the whole replay, reset per step: a traced
    function keeps the capture ops it was traced with. Inside a strategy's replica function
    a value is kept per replica (`replicas`, `replica_draws`), until the runner joins them.
    `digests`: the steps may send digests made where the values are (graph_digests.py)."""

    def __init__(self, digests: bool = True) -> None:
        self.values: "collections.OrderedDict[str, np.ndarray]" = collections.OrderedDict()
        self.draws: List[np.ndarray] = []
        self.replicas: "collections.OrderedDict[str, Dict[int, np.ndarray]]" = collections.OrderedDict()
        self.replica_draws: Dict[int, List[np.ndarray]] = {}
        self._sums: Dict[str, np.ndarray] = {}  # put_many(mean_of=N)'s running sums in this step
        self.live = False  # during a step of this capture's own replay
        self._full = True
        self.held: List[Any] = []  # the functions of this capture's py ops (weakly)
        # What the traced side ops of other kinds than LIGHT_KINDS ask before they copy anything out.
        self._full_flag = tf.Variable(True, trainable=False, name="tracekit_capture_full") \
            if tf.executing_eagerly() else None
        # Which captured tensors each step sends as their digest, made in the traced function
        self.digests = GraphDigests() if digests and tf.executing_eagerly() else None

    @property
    def full(self) -> bool:
        """Whether the step captures every kind; else (a replay with every=K) only LIGHT_KINDS."""
        return self._full

    @full.setter
    def full(self, full: bool) -> None:
        if full != self._full and self._full_flag is not None:
            self._full_flag.assign(full)
        self._full = full

    def plan(self, digested: Collection[str]) -> None:
        """Before a step: `digested`, the keys whose digest alone the golden keeps at this step."""
        if self.digests is not None:
            self.digests.plan(digested)

    def reset(self) -> None:
        self.values = collections.OrderedDict()
        self.draws = []
        self.replicas = collections.OrderedDict()
        self.replica_draws = {}
        self._sums = {}
        del _stale[:]

    def put(self, key: str, tensor: Any) -> None:
        self.put_many([(key, tensor)])

    @tf.autograph.experimental.do_not_convert  # plain Python that adds side ops, even in a tf.function
    def put_many(self, named: List[Tuple[str, Any]], wanted: Optional[Callable[[], bool]] = None,
                 mean_of: int = 1, becomes: Mapping[str, Tuple[str, ...]] = {}) -> None:
        """Capture ("kind/name", tensor) pairs when they run, in one side op (a step's gradients);
        `wanted()`, asked each time they run, may say they are not needed (then nothing is copied);
        `mean_of` N: each is one of N values of a step whose mean is kept (the gradients an
        optimizer accumulating over N calls applies once); `becomes`: for a key named only after
        the step ("grad/#taken:..."), the golden keys it may become (then it may be digested)."""
        if not named:
            return
        keys = [key for key, _ in named]
        light = all(key.split("/", 1)[0] in LIGHT_KINDS for key in keys)
        replica = replica_id()  # the replica tracing or running this code, fixed in the traced function
        sent = self._sent(named, replica is None and mean_of == 1, becomes)

        def store(arrays: List[np.ndarray]) -> None:
            if not (self.full or light) or (wanted is not None and not wanted()):
                return
            for key, value in zip(keys, _regrouped(arrays, sent)):
                if isinstance(value, Digest):
                    self.values[key] = value
                    continue
                if replica is None and mean_of > 1:  # summed in float64, kept in the value's own dtype
                    share = np.asarray(value, np.float64) / mean_of
                    kept = self._sums.get(key)
                    self._sums[key] = share if kept is None or kept.shape != share.shape else kept + share
                    self.values[key] = self._sums[key].astype(np.asarray(value).dtype)
                elif replica is None:
                    self.values[key] = retained(value)
                else:
                    self.replicas.setdefault(key, {})[replica] = np.array(value)
        when_run([t for parts, _ in sent for t in parts], self._keep(store), self.held,
                 None if light else self._full_flag)

    def _sent(self, named: List[Tuple[str, Any]], whole: bool,
              becomes: Mapping[str, Tuple[str, ...]]) -> List[Tuple[List[Any], Optional[Reader]]]:
        """Per captured tensor, what its side op sends and how to read it: a golden key's
        tensor (or one named after the step with the keys it `becomes`), captured `whole` (not a
        replica's part, not one of several summed), may be sent as its digest made here
        (graph_digests.py)."""
        out: List[Tuple[List[Any], Optional[Reader]]] = []
        for key, tensor in named:
            found = None
            later = split_key(key)[1].startswith("#")
            if whole and self.digests is not None and not tf.executing_eagerly() and \
                    (not later or becomes.get(key)):
                found = self.digests.sent(key, tensor, becomes.get(key, ()) if later else ())
            out.append(([tensor], None) if found is None else found)
        return out

    @tf.autograph.experimental.do_not_convert
    def draw(self, tensor: Any) -> None:
        replica = replica_id()
        if replica is None:  # this step's list, not the first's
            when_run([tensor], self._keep(lambda values: self.draws.append(np.array(values[0]))), self.held)
        else:
            when_run([tensor], self._keep(lambda values: self.replica_draws.setdefault(replica, []).append(
                np.array(values[0]))), self.held)

    def check_live(self) -> None:
        """Raise (and remember) that a stale tf.function runs, if this capture is not live."""
        if not self.live:
            _stale.append(STALE)
            raise StaleStep(STALE)

    @staticmethod
    def stale() -> "str | None":
        """Why the step failed when an earlier replay's tf.function ran, else None."""
        return _stale[0] if _stale else None

    def _keep(self, store: Callable[[List[np.ndarray]], None]) -> Callable[[List[np.ndarray]], None]:
        def keep(values: List[np.ndarray]) -> None:
            if not self.live:
                _stale.append(STALE)
                return
            store(values)
        return keep


class VariableReader:
    """Reads many variables in one call: a tf.function returning all their values, rather than
    an eager read op each (about 0.3 ms apiece, the bulk of a small model's state read); those
    asked for as digests, their digests made in it (digest_ops.py), so that only those leave
    TensorFlow."""

    KEPT = 4  # functions kept: one for keyframes, one for the steps between, and room for a change

    def __init__(self) -> None:
        # (ids read, ids digested) -> (the function, id -> Made or None where it returns the value)
        self._reads: Dict[Tuple[Tuple[int, ...], Tuple[int, ...]], Tuple[Any, Dict[int, Any]]] = {}
        self._checked = False  # a digest made here held against numpy's (at the first read making one)
        self.unusable: Optional[str] = None  # why digests are no longer made here

    def read(self, variables: Sequence[Any], digested: Sequence[Any] = ()) -> Callable[[Any], Any]:
        """The variables' values now, as value_of(variable): a read-only array, or a Digest for
        those of `digested` (among `variables`) that can be digested where they are. The first
        digests made are held against numpy's of the same value (the smallest of them, read
        whole too): where they disagree, none are made here again (`unusable` says why, logged)."""
        wanted = set() if self.unusable else {id(v) for v in digested}
        plain = [v for v in variables if id(v) not in wanted]
        digest = [v for v in variables if id(v) in wanted]
        key = (tuple(id(v) for v in plain), tuple(id(v) for v in digest))
        if not key[0] and not key[1]:
            return lambda variable: {}[id(variable)]
        if key not in self._reads:  # the sets change when the optimizers build their slots
            if len(self._reads) >= self.KEPT:
                self._reads.clear()
            self._reads[key] = _reading(plain, digest)
        function, made = self._reads[key]
        values, digests = function()
        out = {id(v): _view(value) for v, value in zip(plain, values)}
        for variable, value in zip(digest, digests):
            ops = made[id(variable)]
            made_here = None if ops is None else ops.digest(*(numpy(x) for x in value))
            # no digest made (a small tensor) or none that stands (a NaN, an Inf): the value
            out[id(variable)] = made_here if made_here is not None else _view(value) if ops is None else numpy(variable)
        if not self._checked and not self._holds(digest, made, out):
            return self.read(variables)
        return lambda variable: out[id(variable)]

    def _holds(self, digested: Sequence[Any], made: Dict[int, Any], out: Dict[int, Any]) -> bool:
        """Whether the smallest digest this read made is numpy's digest of its value (False, with
        `unusable` set, where it is not); True where none was made (a later read checks)."""
        madeup = [v for v in digested if made[id(v)] is not None and not isinstance(out[id(v)], np.ndarray)]
        if not madeup:
            return True
        self._checked = True
        probe = min(madeup, key=lambda v: made[id(v)].count)
        why = disagreement(out[id(probe)], numpy(probe))
        if why is None:
            return True
        self.unusable = "%s: %s" % (probe.name, why)
        LOG.warning("the port's state is digested in numpy from here on, not in TensorFlow: %s", self.unusable)
        return False


def _reading(plain: List[Any], digested: List[Any]) -> Tuple[Any, Dict[int, Any]]:
    """A tf.function returning the values of `plain` and the digests of `digested` (a value where
    none can be made there), traced now; and what it makes of each of `digested`."""
    made: Dict[int, Any] = {}

    def body() -> Any:
        digests = []
        for variable in digested:
            value = tf.identity(variable)
            if made_here(value):
                digest, made[id(variable)] = digesting(tuple(value.shape.as_list()), value.dtype.base_dtype)
                digests.append(digest(value))
            else:
                made[id(variable)] = None
                digests.append(value)
        return [tf.identity(v) for v in plain], digests

    function = tf.function(body, autograph=False)
    function.get_concrete_function()
    return function, made


def _regrouped(arrays: List[np.ndarray], sent: List[Tuple[List[Any], Optional[Reader]]]) -> List[Any]:
    """What a side op's arrays are per captured tensor: its value, or a Digest."""
    out, at = [], 0
    for parts, reader in sent:
        got = arrays[at:at + len(parts)]
        at += len(parts)
        out.append(got[0] if reader is None else reader(got))
    return out


def _view(tensor: Any) -> np.ndarray:
    """A read-only numpy view of an eager tensor's buffer: `.numpy()` copies it, which for a
    model's whole state every step costs as much as the digests of it. The view keeps the tensor
    alive; a variable assigned later writes a buffer of its own (TensorFlow copies a buffer
    still referenced before writing it)."""
    view = getattr(tensor, "_numpy", None)
    if view is None:
        return numpy(tensor)
    array = view()
    if isinstance(array, np.ndarray):
        array.flags.writeable = False
    return array
