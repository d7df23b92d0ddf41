"""A port built and run in float64, for the float64 arbiter (arbiter.py): Keras' dtype policy
set to float64 while the port is built (`float64_policy`), the float32 its own code creates
widened (`float64_creations`), its step fed float64 (`cast_up`), and the checks that say why a
port cannot be run so (`check_float64`, `why_mixed`)."""

from __future__ import annotations

import contextlib
import inspect
import sys
from typing import Any, Callable, Iterator, Mapping, Optional

import numpy as np

from ..errors import ReplayError
from ..replay.variables import model_variables, name_of
from .tf_import import tf


@contextlib.contextmanager
def float64_policy() -> Iterator[None]:
    """Keras layers built inside hold and compute float64 (tf-keras, and Keras 3 where loaded)."""
    keras = tf.keras
    saved = keras.backend.floatx(), keras.mixed_precision.global_policy()
    keras3 = sys.modules.get("keras") if "keras.config" in sys.modules else None
    saved3 = (keras3.config.floatx(), keras3.config.dtype_policy()) if keras3 is not None else None
    keras.backend.set_floatx("float64")
    keras.mixed_precision.set_global_policy("float64")
    if keras3 is not None:
        keras3.config.set_floatx("float64")
        keras3.config.set_dtype_policy("float64")
    try:
        yield
    finally:
        keras.backend.set_floatx(saved[0])
        keras.mixed_precision.set_global_policy(saved[1])
        if keras3 is not None and saved3 is not None:
            keras3.config.set_floatx(saved3[0])
            keras3.config.set_dtype_policy(saved3[1])


# tf.<name> -> (its dtype argument's float32 default: None where the value decides)
_CREATIONS = {"cast": None, "one_hot": "float32", "constant": None, "convert_to_tensor": None, "zeros": "float32",
              "ones": "float32", "zeros_like": None, "ones_like": None, "eye": "float32", "fill": None}


@contextlib.contextmanager
def float64_creations() -> Iterator[None]:
    """tf.one_hot, tf.cast, tf.constant and the other creating functions make float64 where the
    port asks for float32, by name or by default (a Python float, a float32 array): the port's own
    float32 would otherwise meet the float64 layers. Only the `tf` module's functions change,
    which is what a port calls; TensorFlow's and Keras' own modules keep theirs."""
    saved = {name: getattr(tf, name) for name in _CREATIONS}
    for name, original in saved.items():
        setattr(tf, name, _widening(original, _CREATIONS[name]))
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(tf, name, original)


def _widening(original: Callable[..., Any], default: Optional[str]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    def widened(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:  # let TensorFlow say what is wrong with the call
            return original(*args, **kwargs)
        given = bound.arguments
        dtype = given.get("dtype")
        if dtype is not None:
            if tf.as_dtype(dtype) == tf.float32:
                given["dtype"] = tf.float64
        elif default is not None and given.get("on_value") is None and given.get("off_value") is None:
            given["dtype"] = tf.float64
        else:
            for value_name in ("value", "input"):
                if value_name in given:
                    given[value_name] = _wide_value(given[value_name])
        return original(*bound.args, **bound.kwargs)
    return widened


def _wide_value(value: Any) -> Any:
    """A Python float, or a float32 array or list of floats, as float64; anything else as it is."""
    if tf.is_tensor(value) or isinstance(value, (bool, int, str, bytes)) or value is None:
        return value
    try:
        array = np.asarray(value)
    except Exception:  # a structure of tensors: not a creation
        return value
    # a Python float or list of them is float64 to numpy, but float32 to TensorFlow: made explicit
    return array.astype(np.float64) if array.dtype.kind == "f" else value


def why_mixed(exc: BaseException) -> str:
    """Why the float64 port could not run, the op named where float32 met float64."""
    text = "%s: %s" % (type(exc).__name__, exc)
    if "double tensor" in text or "float tensor" in text:
        return ("the port's step mixes float32 and float64, so its float64 build could not run; float32 that "
                "tf.one_hot, tf.cast, tf.constant, tf.zeros/ones and the like create is widened, so an op of its own "
                "or a layer's fixed dtype made this one: %s" % text)
    return text


def cast_up(step_fn: Any) -> Any:
    """The step function fed float64 where the golden's inputs are float32."""
    if isinstance(step_fn, Mapping):
        return {name: cast_up(fn) for name, fn in step_fn.items()}

    def up(value: Any) -> Any:
        return tf.cast(value, tf.float64) if getattr(value, "dtype", None) == tf.float32 else value

    def step(*args: Any, **kwargs: Any) -> Any:
        return step_fn(*tf.nest.map_structure(up, args), **tf.nest.map_structure(up, kwargs))
    step.python_function = getattr(step_fn, "python_function", step_fn)  # the port's identity, not this wrapper's
    return step


def check_float64(model: Any) -> None:
    """A port that fixed float32 itself (a layer's dtype=) would be judged by a float32 run."""
    narrow = ["%s (%s)" % (name_of(v), v.dtype.name) for v in (model_variables(model) if model is not None else [])
              if v.dtype.is_floating and v.dtype != tf.float64]
    if narrow:
        raise ReplayError("under the float64 policy the port built %s: it fixes their dtype (a layer's dtype=); "
                          "leave it to the policy" % ", ".join(narrow[:4]))
