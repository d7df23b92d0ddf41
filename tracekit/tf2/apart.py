"""Each run of a judged check in a process of its own, so that the check holds one port at a time.

A judged check makes a fresh port for every run (the forced one, the port's own, each perturbed
replay of the envelope, the arbiter's float32 and float64 steps). A port made and dropped in one
process does not give back its memory: with a Keras optimizer's update traced by tf.function,
TensorFlow 2.21 keeps about the model's weights and slots of every port after Python has freed
it (0.25 GB for each 21M-parameter MLP with Adam; gc, clear_session and the kernel cache do not
return it). In a forked child a port's memory goes with the child, and the check's peak stays at
one port plus what the parent compares.

A fork is safe only while TensorFlow's runtime has not started in this process (its thread pools
do not survive one) and no other thread runs (a lock it holds would stay held in the child).
Where either is not so (a test session that ran TensorFlow before, a port given as an object),
the runs stay in this process and `Apart.where` says so; TRACEKIT_APART=0 keeps them there too.
"""

from __future__ import annotations

import gc
import os
import threading
from typing import Callable, TypeVar

from .._isolate import ChildCrashed, in_child
from ..errors import ReplayError
from .tf_import import tf  # noqa: F401  # TensorFlow imported (its runtime not started) before any fork

T = TypeVar("T")

APART = "each run of the port in a process of its own"
HERE = "the runs of the port in this process (%s): peak memory grows with each fresh port"


def _runtime_started() -> bool:
    """Whether TensorFlow's eager runtime has started in this process (an op ran, a model was built)."""
    from tensorflow.python.eager import context

    return getattr(context.context(), "_context_handle", True) is not None  # unknown: taken as started


class Apart:
    """Runs calls that make and drive a port: forked while that is safe, else in this process;
    `where` says how they ran (in this process, if any one did)."""

    def __init__(self) -> None:
        self.where = ""

    def _why_here(self) -> str:
        if os.environ.get("TRACEKIT_APART", "1") == "0":
            return "TRACEKIT_APART=0"
        if not hasattr(os, "fork"):
            return "no fork on this system"
        if _runtime_started():
            return "TensorFlow had already started here"
        if threading.active_count() > 1:
            return "other threads were running"
        return ""

    def __call__(self, call: Callable[[], T]) -> T:
        why = self._why_here()
        if why:
            self.where = HERE % why
            return call()
        self.where = self.where or APART
        gc.freeze()  # the child's collections leave the objects it inherits alone: their pages stay shared
        try:
            return in_child(call)
        except ChildCrashed as exc:
            raise ReplayError("a run of the port died of %s in its own process%s; run the check with "
                              "TRACEKIT_APART=0 to see it in this one"
                              % (exc.signal_name, " (killed: out of memory?)" if exc.signal_name == "SIGKILL"
                                 else "")) from None
        finally:
            gc.unfreeze()
