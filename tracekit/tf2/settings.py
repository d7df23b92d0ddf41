"""TensorFlow's global switches that change numerics, set for the length of a replay:
op determinism, TensorFloat-32 matmuls on Ampere+ GPUs, and Grappler's rewrites. Each is
recorded in the actual trace's environment (meta["tensorflow"]), so an environment diff
shows it, and put back as it was afterwards."""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Mapping, Optional

from ..errors import UsageError
from .tf_import import tf

# Grappler passes that reorder or fuse float arithmetic: what makes graph results differ from eager.
NUMERIC_PASSES = ("arithmetic_optimization", "remapping", "constant_folding", "layout_optimizer")


def _determinism_enabled() -> bool:
    from tensorflow.python.framework import config  # the switch's own module: TF has no public getter

    return bool(config.is_op_determinism_enabled())


def _set_determinism(on: bool) -> None:
    from tensorflow.python.framework import config

    if on:
        config.enable_op_determinism()
    else:
        config.disable_op_determinism()


@contextlib.contextmanager
def numeric_switches(determinism: Optional[bool] = None, tf32: Optional[bool] = None,
             grappler: "Mapping[str, bool] | bool | None" = None) -> Iterator[Dict[str, Any]]:
    """Set the switches that are not None; yields what was set. grappler=False switches off
    the passes that change float results (NUMERIC_PASSES); a dict sets Grappler's options by
    name (tf.config.optimizer.set_experimental_options)."""
    if grappler is False:
        options: Dict[str, Any] = {name: False for name in NUMERIC_PASSES}
    elif grappler is None or grappler is True:
        options = {}
    elif isinstance(grappler, Mapping):
        options = dict(grappler)
    else:
        raise UsageError("grappler must be False (switch off the passes that change float results) or a dict "
                         "of tf.config.optimizer options, got %r" % (grappler,))
    saved_determinism = _determinism_enabled()
    saved_tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
    saved_options = tf.config.optimizer.get_experimental_options()
    try:
        if determinism is not None:
            _set_determinism(bool(determinism))
        if tf32 is not None:
            tf.config.experimental.enable_tensor_float_32_execution(bool(tf32))
        if options:
            tf.config.optimizer.set_experimental_options(options)
        yield {"determinism": determinism, "tf32": tf32, "grappler": options or None}
    finally:
        if determinism is not None:
            _set_determinism(saved_determinism)
        if tf32 is not None:
            tf.config.experimental.enable_tensor_float_32_execution(saved_tf32)
        if options:  # an option never set goes back to None: TensorFlow's default for it
            tf.config.optimizer.set_experimental_options({name: saved_options.get(name) for name in options})
