"""Replaying a golden through a TF2 training step (eager or tf.function).

Everything TensorFlow-specific of the replay lives here; replay/loop.py drives the
loop. While a step runs, the replay intercepts:
- Keras optimizers' `apply_gradients` (which `minimize` calls): the gradients applied
  and the learning rate used; on the first call it builds the slots and, with
  init="golden", loads the golden's initial slots and iteration count; `minimize`,
  for the loss it computes;
- the random functions behind dropout and friends (`tf.random.*`, stateful and
  stateless): with random="tape" each draw is replaced by the golden's next recorded
  draw; otherwise TF2's own draws are recorded;
- `tracekit.tap(name, tensor)`;
- variable creation: a step after the first must create none.
Values inside a tf.function are captured by `tf.numpy_function` side ops, which
tf.function runs in program order.
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import os
import sys
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from .. import taps as tap_module
from ..errors import ReplayError, UsageError
from ..keys import make_key
from . import varmap

if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # TF1-style layers and Keras 2 (tf-keras)

import tensorflow as tf  # noqa: E402
from tensorflow.python.ops import random_ops, stateless_random_ops  # noqa: E402

RANDOM_FUNCTIONS = [
    (random_ops, "random_uniform"), (random_ops, "random_normal"), (random_ops, "truncated_normal"),
    (stateless_random_ops, "stateless_random_uniform"), (stateless_random_ops, "stateless_random_normal"),
    (stateless_random_ops, "stateless_truncated_normal"),
]

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


# Keras slot attributes (new optimizers; legacy ones name their slots by role) for each TF1 slot role.
NEW_OPTIMIZER_SLOTS = {"m": ("_momentums",), "v": ("_velocities",), "vhat": ("_velocity_hats",),
                       "momentum": ("momentums", "_momentums"),  # SGD, RMSprop
                       "rms": ("_velocities",), "accumulator": ("_accumulators",)}


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


def when_run(tensor: Any, callback: Callable[[np.ndarray], None]) -> None:
    """callback(value of tensor) now when eager, else each time the traced function runs
    (a tf.numpy_function side op: stateful, so tf.function runs it in program order)."""
    if tf.executing_eagerly():
        callback(_numpy(tensor))
        return

    def call(value: np.ndarray) -> np.ndarray:
        callback(np.array(value))
        return np.zeros((), np.int32)
    tf.numpy_function(call, [tensor], tf.int32, name="tracekit_capture")


# Set when a capture op of an earlier replay ran: its tf.function was traced then, and
# keeps that replay's capture ops (and misses this one's variable mapping).
_stale: List[str] = []
STALE = ("the step function is a tf.function traced during an earlier replay: it still reports to that "
         "one. Pass each replay a fresh tf.function (or the plain Python function)")


class Capture:
    """What one step produced, as named numpy arrays. One object for the whole replay,
    reset per step: a traced function keeps the capture ops it was traced with."""

    def __init__(self) -> None:
        self.values: collections.OrderedDict = collections.OrderedDict()
        self.draws: List[np.ndarray] = []
        self.live = False  # during a step of this capture's own replay

    def reset(self) -> None:
        self.values = collections.OrderedDict()
        self.draws = []

    def put(self, key: str, tensor: Any) -> None:
        when_run(tensor, self._keep(lambda value: self.values.__setitem__(key, value)))

    def draw(self, tensor: Any) -> None:
        when_run(tensor, self._keep(lambda value: self.draws.append(value)))  # this step's list, not the first's

    def _keep(self, store: Callable[[np.ndarray], None]) -> Callable[[np.ndarray], None]:
        def keep(value: np.ndarray) -> None:
            if not self.live:
                _stale.append(STALE)
                return
            store(value)
        return keep


class TF2Session:
    """The TF2 side of one replay: maps variables, loads state, runs steps, reads state."""

    def __init__(self, golden: Any, model: Any, variables: Any, var_map: Any, init: str, random: str) -> None:
        self.golden = golden
        self.init = init
        self.random = random
        self.capture = Capture()
        self.not_replayed: Dict[str, str] = {}
        self._model = model
        tf_vars = list(variables) if variables is not None else _model_variables(model)
        if not tf_vars:
            raise ReplayError("no TF2 variables to replay into: build the model before replaying (call it once "
                              "on a batch, or model.build(input_shape)), or pass variables=[...]")
        self._keys = {n: make_key("var", n) for n in golden.names("var")}
        self._keys.update((n, make_key("slot", n)) for n in golden.names("slot"))  # golden state name -> key
        model_names, self._slot_names, self._iterations, orphans = varmap.split_state(list(self._keys))
        for name in orphans:
            self.not_replayed[self._keys[name]] = "TF1 optimizer state with no Keras counterpart"
        if model is None and "regularization" in golden.names("loss"):
            self.not_replayed["loss/regularization"] = "pass model= to compare it with the sum of model.losses"
        shapes = {t.name: t.shape for t in golden.catalog if t.kind in ("var", "slot")}
        self.mapping = varmap.match([(n, shapes.get(n) or ()) for n in model_names],
                                    [varmap.Candidate(v.name, tuple(v.shape.as_list()), v) for v in tf_vars],
                                    var_map)
        if not self.mapping.ok:
            raise ReplayError("the TF2 variables do not match the golden's:\n" + "\n".join(self.mapping.lines()) +
                              "\nname the port's layers like the TF1 scopes, or pass var_map= (a dict, regex "
                              "rules or a callable)")
        self._by_var = {id(c.obj): name for name, c in self.mapping.pairs.items()}
        self._slots: List[Tuple[str, Any, str]] = []  # golden name, TF2 slot variable, role
        self._optimizer: Any = None
        self._iteration_var: Any = None
        self._tape: List[Tuple[str, np.ndarray]] = []
        self._tape_pos = 0
        self._tape_error: Optional[ReplayError] = None  # raised inside a tf.function's numpy op
        self._step_index = 0
        self._created: List[str] = []

    # ---- state --------------------------------------------------------------------------------

    def load_initial(self) -> None:
        """Assign the golden's initial model variables (slots follow at the first update)."""
        initial = self.golden.initial
        for name, cand in self.mapping.pairs.items():
            cand.obj.assign(_cast(initial["var", name], cand.obj))

    def read_state(self) -> List[Tuple[str, np.ndarray]]:
        """("kind/golden name", value) of every mapped variable, slot and the step counter."""
        out = [(make_key("var", name), cand.obj.numpy()) for name, cand in self.mapping.pairs.items()]
        for name, var, role in self._slots:
            out.append((make_key("slot", name), self._slot_to_tf1(var.numpy(), role)))
        if self._iteration_var is not None:
            out.extend((self._keys[name], np.asarray(self._iteration_var.numpy(), dtype=np.int64))
                       for name in self._iterations)
        return out

    def regularization(self) -> Optional[np.ndarray]:
        losses = getattr(self._model, "losses", None)
        if not losses:
            return None
        return _numpy(tf.add_n([tf.cast(l, tf.float32) for l in losses]))

    # ---- a step -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def step(self, index: int, draws: List[Tuple[str, np.ndarray]]) -> Iterator[Capture]:
        self.capture.reset()
        self._tape, self._tape_pos, self._tape_error, self._step_index = draws, 0, None, index
        self._created = []
        del _stale[:]
        self.capture.live = True
        try:
            with self._patched(), tf.variable_creator_scope(self._creator):
                yield self.capture
        except Exception:
            if _stale:
                raise ReplayError(_stale[0]) from None
            if self._tape_error is not None:  # TF wraps it in an op error: give the user ours
                raise self._tape_error from None
            raise
        finally:
            self.capture.live = False
        if _stale:
            raise ReplayError(_stale[0])
        if index > 0 and self._created:
            raise ReplayError("step %d created variables (%s): a TF2 port must create its variables once, before "
                              "or in its first step" % (index, ", ".join(self._created[:5])))

    def check_tape(self, index: int) -> None:
        if self.random == "tape" and self._tape_pos != len(self._tape):
            raise ReplayError("step %d: the TF2 step drew %d random tensors, the golden recorded %d (%s); the "
                              "random tape injects them in order, so the port must draw as often"
                              % (index, self._tape_pos, len(self._tape), ", ".join(n for n, _ in self._tape)))

    def _creator(self, next_creator: Callable[..., Any], **kwargs: Any) -> Any:
        variable = next_creator(**kwargs)
        self._created.append(getattr(variable, "name", "?"))
        return variable

    @contextlib.contextmanager
    def _patched(self) -> Iterator[None]:
        saved: List[Tuple[Any, str, Any]] = []
        for module, name in RANDOM_FUNCTIONS:
            wrapped = self._random(getattr(module, name), name)
            for owner, attr in _random_aliases(module, name):
                saved.append((owner, attr, getattr(owner, attr)))
                setattr(owner, attr, wrapped)
        for name, wrap in (("apply_gradients", self._apply_gradients), ("minimize", self._minimize)):
            for cls in _optimizer_classes(name):
                saved.append((cls, name, cls.__dict__[name]))
                setattr(cls, name, wrap(cls.__dict__[name]))
        try:
            with tap_module.capturing(self._tap):
                yield
        finally:
            for owner, name, original in reversed(saved):
                setattr(owner, name, original)

    def _tap(self, name: str, tensor: Any) -> Any:
        self.capture.put(make_key("tap", name), tensor)
        return tensor

    def _random(self, original: Callable[..., Any], fname: str) -> Callable[..., Any]:
        session = self
        signature = inspect.signature(original)

        def draw(*args: Any, **kwargs: Any) -> Any:
            if session.random != "tape":
                value = original(*args, **kwargs)
                session.capture.draw(value)
                return value
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            call = bound.arguments
            dtype = tf.as_dtype(call["dtype"])
            shape = tf.cast(call["shape"], tf.int64)

            def next_draw(want: np.ndarray) -> np.ndarray:
                return session._next_draw(fname, tuple(int(d) for d in np.reshape(want, [-1])), dtype)
            if tf.executing_eagerly():
                raw = tf.constant(next_draw(shape.numpy()), dtype=dtype)
            else:
                raw = tf.numpy_function(next_draw, [shape], dtype, name="tracekit_tape")
                raw.set_shape(_static_shape(call["shape"]))
            session.capture.draw(raw)
            return _affine(fname, call, dtype, raw)
        return draw

    def _next_draw(self, fname: str, shape: Tuple[int, ...], dtype: Any) -> np.ndarray:
        if not self.capture.live:
            _stale.append(STALE)
            raise ReplayError(STALE)
        where = "step %d, random draw %d (%s)" % (self._step_index, self._tape_pos, fname)
        if self._tape_pos >= len(self._tape):
            self._tape_failure("%s: the TF2 step draws more random tensors than the golden recorded (%d); use "
                               "random='seed' or 'none' if the port's randomness differs" % (where, len(self._tape)))
        name, value = self._tape[self._tape_pos]
        if tuple(value.shape) != shape or value.dtype.kind != np.dtype(dtype.as_numpy_dtype).kind:
            self._tape_failure("%s: the golden recorded %s %s from %s, the TF2 step asks for %s %s; the random tape "
                               "injects draws in order, so the port must draw the same shapes in the same order"
                               % (where, value.dtype, tuple(value.shape), name, dtype.name, shape))
        self._tape_pos += 1
        return value.astype(dtype.as_numpy_dtype, copy=False)

    def _tape_failure(self, message: str) -> None:
        # Kept: raised inside a tf.function, TF re-raises it wrapped in an op error.
        self._tape_error = ReplayError(message)
        raise self._tape_error

    def _apply_gradients(self, original: Callable[..., Any]) -> Callable[..., Any]:
        session = self

        def apply_gradients(optimizer: Any, grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
            pairs = list(grads_and_vars)
            session._prepare_optimizer(optimizer, [v for _, v in pairs])
            session.capture.put("lr/learning_rate", _learning_rate(optimizer))
            for grad, var in pairs:
                name = session._by_var.get(id(var)) or session._by_var.get(id(_unwrap(var)))
                if grad is not None and name is not None:
                    session.capture.put(make_key("grad", name), tf.convert_to_tensor(grad))
            return original(optimizer, pairs, *args, **kwargs)
        return apply_gradients

    def _minimize(self, original: Callable[..., Any]) -> Callable[..., Any]:
        session = self

        def minimize(optimizer: Any, loss: Any, *args: Any, **kwargs: Any) -> Any:
            if callable(loss):  # the usual Keras form: capture the loss where it is computed
                compute = loss

                def loss() -> Any:
                    value = compute()
                    session.capture.put("loss/loss", value)
                    return value
            elif loss is not None:
                session.capture.put("loss/loss", loss)
            return original(optimizer, loss, *args, **kwargs)
        return minimize

    def _prepare_optimizer(self, optimizer: Any, var_list: List[Any]) -> None:
        """First update: build the slots, map them, and load their initial state."""
        if self._optimizer is optimizer:
            return
        if self._optimizer is not None:
            raise ReplayError("the TF2 step uses more than one optimizer; replay supports one")
        self._optimizer = optimizer
        with tf.init_scope():  # runs once, eagerly, also while a tf.function is traced
            if hasattr(optimizer, "_create_all_weights"):  # legacy (OptimizerV2)
                optimizer._create_all_weights(var_list)
            elif hasattr(optimizer, "build"):
                optimizer.build(var_list)
            self._iteration_var = optimizer.iterations
            self._map_slots(optimizer)
            if self.init == "golden":
                initial = self.golden.initial
                lr = float(_numpy(_learning_rate(optimizer)))
                for name, var, role in self._slots:
                    var.assign(_cast(self._slot_from_tf1(initial["slot", name], role, lr), var))
                for name in self._iterations:
                    if self._keys[name] in initial:
                        self._iteration_var.assign(int(initial[self._keys[name]]))

    def _map_slots(self, optimizer: Any) -> None:
        """Pair the golden's optimizer slots with the TF2 optimizer's; any golden slot left
        over stops the replay before the first update, listed like the variables."""
        tf2_of = {name: cand.obj for name, cand in self.mapping.pairs.items()}
        missing = []
        for name, var_name, role in self._slot_names:
            variable = tf2_of.get(var_name)
            slot = None if variable is None else _keras_slot(optimizer, variable, role)
            if slot is None:
                missing.append("  only in the golden: %s (%s of %s)" % (name, role, var_name))
            else:
                self._slots.append((name, slot, _convention(name, role)))
        if missing:
            raise ReplayError(
                "the TF2 optimizer (%s) has no slot for %d of the golden's %d optimizer slots:\n%s\nuse the "
                "optimizer the TF1 code used (AdamOptimizer -> Adam, MomentumOptimizer -> SGD(momentum=...), "
                "RMSPropOptimizer -> RMSprop)" % (type(optimizer).__name__, len(missing), len(self._slot_names),
                                                  "\n".join(missing)))

    # tf.train.MomentumOptimizer accumulates gradients and scales by lr when it updates;
    # Keras SGD accumulates -lr * gradients. The same state when lr is constant: convert.
    @staticmethod
    def _slot_from_tf1(value: np.ndarray, role: str, lr: float) -> np.ndarray:
        return (-lr * value).astype(value.dtype) if role == "tf1-momentum" else value

    def _slot_to_tf1(self, value: np.ndarray, role: str) -> np.ndarray:
        if role == "tf1-momentum":
            lr = float(self.capture.values.get("lr/learning_rate", 1.0))
            return (-value / lr).astype(value.dtype)
        return value


def _model_variables(model: Any) -> List[Any]:
    if model is None:
        return []
    try:
        return list(model.variables)
    except ValueError:  # an unbuilt Keras model refuses to list its weights
        return []


def _convention(name: str, role: str) -> str:
    return "tf1-momentum" if role == "momentum" and name.endswith("/Momentum:0") else role


def _optimizer_classes(method: str) -> List[Any]:
    """The Keras optimizer classes that define `method` (new and legacy)."""
    out = []
    optimizers = tf.keras.optimizers
    for cls in (getattr(optimizers, "Optimizer", None), getattr(getattr(optimizers, "legacy", None), "Optimizer", None)):
        if cls is None:
            continue
        for base in cls.__mro__:  # patch where the method is defined
            if method in base.__dict__:
                if base not in out:
                    out.append(base)
                break
    return out


def _keras_slot(optimizer: Any, variable: Any, role: str) -> Any:
    if hasattr(optimizer, "get_slot_names"):  # legacy OptimizerV2: slots are named by role
        return optimizer.get_slot(variable, role) if role in optimizer.get_slot_names() else None
    slots = next((getattr(optimizer, a) for a in NEW_OPTIMIZER_SLOTS.get(role, ()) if getattr(optimizer, a, None)),
                 None)
    index = getattr(optimizer, "_index_dict", {}).get(optimizer._var_key(variable))
    if not slots or index is None or index >= len(slots):
        return None
    return slots[index]


def _learning_rate(optimizer: Any) -> Any:
    """The learning rate this update uses (before `iterations` moves on)."""
    if hasattr(optimizer, "_decayed_lr"):  # legacy OptimizerV2
        return optimizer._decayed_lr(tf.float32)
    lr = optimizer._learning_rate
    schedule = tf.keras.optimizers.schedules.LearningRateSchedule
    if isinstance(lr, schedule):
        return tf.cast(lr(optimizer.iterations), tf.float32)
    return tf.cast(tf.convert_to_tensor(lr), tf.float32)


def _unwrap(variable: Any) -> Any:
    container = getattr(variable, "_distributed_container", None)
    return container() if callable(container) else variable


def _numpy(value: Any) -> np.ndarray:
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def _cast(value: Any, variable: Any) -> np.ndarray:
    arr = np.asarray(value)
    target = variable.dtype.as_numpy_dtype
    if tuple(arr.shape) != tuple(variable.shape.as_list()):
        raise ReplayError("cannot load %s: golden shape %s, TF2 shape %s" % (variable.name, arr.shape,
                                                                          variable.shape.as_list()))
    return arr.astype(target, copy=False)


def _static_shape(shape: Any) -> Any:
    try:
        return tf.TensorShape(tf.get_static_value(tf.convert_to_tensor(shape)))
    except (TypeError, ValueError):
        return tf.TensorShape(None)


def call_step(step_fn: Callable[..., Any], feeds: Dict[str, Any], inputs: Any) -> Dict[str, np.ndarray]:
    """Call the user's step with this step's inputs; its result as {"kind/name": array}.

    inputs=None passes one dict {golden input name: tensor}; a dict {golden input name:
    keyword} passes keywords. The step may return nothing, its loss, or a dict whose keys
    are "loss", "lr"/"learning_rate", "kind/name", or other names (kept as fetch/<name>)."""
    tensors = {name: tf.constant(value) for name, value in feeds.items()}
    if inputs is None:
        result = step_fn(tensors)
    else:
        missing = [name for name in inputs if name not in tensors]
        if missing:
            raise ReplayError("inputs= names golden inputs %s, but the step records only %s"
                              % (", ".join(missing), ", ".join(sorted(tensors))))
        result = step_fn(**{keyword: tensors[name] for name, keyword in inputs.items()})
    if result is None:
        return {}
    if not isinstance(result, dict):
        return {"loss/loss": _numpy(result)}
    out = {}
    for key, value in result.items():
        if "/" in key:
            pass
        elif key == "loss":
            key = "loss/loss"
        elif key in ("lr", "learning_rate"):
            key = "lr/learning_rate"
        else:
            key = make_key("fetch", key)
        out[key] = _numpy(value)
    return out


@contextlib.contextmanager
def aligned_seeds(trace: Any) -> Iterator[Any]:
    """DeterministicRandomTestTool with the seed and mode the golden was recorded with."""
    seeds = trace.meta.get("seeds") or {}
    seed = seeds.get("seed") if seeds.get("seed") is not None else seeds.get("graph_seed")
    if seed is None:
        raise UsageError("%s was recorded without a seed: seed alignment needs record(seed=..., seed_mode=...)"
                         % trace.path)
    tool = tf.compat.v1.keras.utils.DeterministicRandomTestTool(seed=int(seed), mode=seeds.get("mode") or
                                                                "num_random_ops")
    with tool.scope():
        yield tool


def check_usage(init: str, random: str) -> None:
    if init not in ("golden", "seed"):
        raise UsageError("init must be 'golden' (load the golden's initial state) or 'seed', got %r" % (init,))
    if random not in ("tape", "seed", "none"):
        raise UsageError("random must be 'tape', 'seed' or 'none', got %r" % (random,))
