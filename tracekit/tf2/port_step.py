"""The port's step as a replay calls it: with the golden's inputs (call_step, its result as
"kind/name" arrays), a compiled Keras model's own train step made into one (keras_train_step),
and the seeds aligned with the golden's (aligned_seeds)."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Iterator, List, Optional

import numpy as np

from ..errors import ReplayError, UsageError
from ..replay.returned import called, named
from .capture import numpy
from .tf_import import tf


def call_step(step_fn: Callable[..., Any], tensors: Dict[str, Any], inputs: Optional[Dict[str, str]]) -> Dict[str, np.ndarray]:
    """Call the user's step with this step's inputs (tensors, or a strategy's distributed
    values); its result as {"kind/name": array}.

    inputs=None passes one dict {golden input name: tensor}; a dict {golden input name:
    keyword} passes keywords. The step may return nothing, its loss, or a dict whose keys
    are "loss", "lr"/"learning_rate", "kind/name", or other names (kept as fetch/<name>)."""
    def array(key: str, value: Any) -> np.ndarray:
        if isinstance(value, tf.distribute.DistributedValues):
            raise UsageError("the step returned per-replica values for %r: return the cross-replica value, "
                             "strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None) for a loss scaled by "
                             "the global batch (tf.nn.compute_average_loss)" % (key,))
        return numpy(value)
    return named(called(step_fn, tensors, inputs), array)


def keras_train_step(model: Any, x: str = "x:0", y: str = "y:0", sample_weight: Optional[str] = None,
                     jit: bool = True) -> Callable[[Dict[str, Any]], Dict[str, Any]]:
    """A replay step running a compiled Keras model's own training step (what `fit` runs per
    batch: its compiled loss, optimizer and metrics) on the recorded batch. The step's loss
    is the batch's loss, taken from `model.compute_loss`; `train_step`'s returned "loss" is
    a metric's running mean over the epoch, never recorded as the loss."""
    if getattr(model, "optimizer", None) is None or not hasattr(model, "train_step"):
        raise UsageError("keras_train_step needs a compiled Keras model (model.compile(optimizer, loss) first)")
    compute_loss = model.compute_loss

    def step(inputs: Dict[str, Any]) -> Dict[str, Any]:
        missing = [n for n in (x, y, sample_weight) if n is not None and n not in inputs]
        if missing:
            raise ReplayError("keras_train_step: the golden's step has no input %s; it has %s (pass x=, y=)"
                              % (", ".join(missing), ", ".join(sorted(inputs))))
        losses: List[Any] = []

        def batch_loss(*args: Any, **kwargs: Any) -> Any:
            loss = compute_loss(*args, **kwargs)
            losses.append(loss)
            return loss
        model.compute_loss = batch_loss  # for this call only (traced once under tf.function)
        try:
            batch = (inputs[x], inputs[y]) if sample_weight is None else (inputs[x], inputs[y], inputs[sample_weight])
            model.train_step(batch)
        finally:
            del model.compute_loss
        if not losses:
            raise ReplayError("keras_train_step: %s.train_step did not call compute_loss; return the loss from "
                              "your own step function instead" % type(model).__name__)
        return {"loss": losses[-1]}

    return tf.function(step) if jit else step


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

