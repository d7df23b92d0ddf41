"""A golden and its replay as two TensorBoard runs of scalars, so TensorBoard overlays them.

Run "golden" and run "actual" each hold `loss/<name>`, `lr/<name>` and `norm/<variable>`
(each variable's L2 norm) against step; the actual run also holds `error_abs/<kind>` and
`error_rel/<kind>`, the largest error of each kind at each step (from the comparison).

Written with TensorFlow's own summary writer (`tf.summary.write`, tagged for TensorBoard's
scalars plugin): the modern environment always has TensorFlow, and its writer needs no
`tensorboard` package, where `tf.summary.scalar` would. TensorFlow is imported only here,
when an export is asked for.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..comparison.result import Comparison
from ..errors import MissingDependency, UsageError
from ..keys import INITIAL_STEP
from ..store import Trace

Series = List[Tuple[int, float]]  # (step, value)
SCALAR_KINDS = ("loss", "lr")


@dataclass
class Runs:
    """run name -> tag -> its points, in step order."""

    runs: Dict[str, Dict[str, Series]] = field(default_factory=dict)

    def add(self, run: str, tag: str, step: int, value: float) -> None:
        if math.isfinite(value):
            self.runs.setdefault(run, {}).setdefault(tag, []).append((step, value))


def trace_scalars(trace: Trace, run: str, runs: Runs) -> None:
    """Losses, learning rates and each variable's norm at each step of the trace."""
    for index in range(len(trace)):
        step = trace.step(index)
        for key in step:
            kind, _, name = key.partition("/")
            if kind not in SCALAR_KINDS and kind != "var":
                continue
            value = np.asarray(step[key])
            if value.dtype.kind not in "fiu" or value.size == 0:
                continue
            if kind == "var":
                runs.add(run, "norm/" + name, index, float(np.linalg.norm(value.astype(np.float64).ravel())))
            elif value.size == 1:
                runs.add(run, "%s/%s" % (kind, name), index, float(value.reshape(())))


def error_scalars(result: Comparison, run: str, runs: Runs) -> None:
    """The largest absolute and relative error of each kind at each compared step."""
    worst: Dict[Tuple[str, str], Dict[int, float]] = {}
    for t in result.tensors:
        for step, stats in t.by_step.items():
            if step == INITIAL_STEP or stats.problem:
                continue
            for tag, value in (("error_abs/" + t.kind, stats.max_abs), ("error_rel/" + t.kind, stats.max_rel)):
                if math.isfinite(value):
                    row = worst.setdefault((run, tag), {})
                    row[step] = max(row.get(step, 0.0), value)
    for (name, tag), row in sorted(worst.items()):
        for step in sorted(row):
            runs.add(name, tag, step, row[step])


def write_runs(runs: Runs, folder: str) -> List[str]:
    """One event file per run under folder/<run>/; returns the run directories."""
    try:
        os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # as the replayer, should Keras load
        import tensorflow as tf
        from tensorflow.core.framework import summary_pb2
    except ImportError:
        raise MissingDependency("the TensorBoard export writes with TensorFlow's summary writer: run it in an "
                                "environment with TensorFlow 2 (the modern one)") from None
    if not hasattr(tf.summary, "write") or not tf.executing_eagerly():
        raise MissingDependency("the TensorBoard export needs TensorFlow 2's summary writer (this is TensorFlow %s): "
                                "run it in the modern environment" % tf.__version__)
    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    made = []
    for run, tags in runs.runs.items():
        directory = os.path.join(folder, run)
        writer = tf.summary.create_file_writer(directory)
        with writer.as_default():
            for tag, points in tags.items():
                for step, value in points:
                    tf.summary.write(tag, tf.constant(value, tf.float32), step=step, metadata=metadata)
        writer.flush()
        writer.close()
        made.append(directory)
    return made


@dataclass(frozen=True)
class TensorBoardExport:
    folder: str
    runs: Dict[str, int]  # run -> number of tags


def export_tensorboard(golden: Trace, folder: str, actual: Optional[Trace] = None,
                       result: Optional[Comparison] = None) -> TensorBoardExport:
    """Write the golden (and the actual trace, with the comparison's errors) as TensorBoard
    runs under `folder`."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise UsageError("%s is a file: give a directory for the TensorBoard runs" % folder)
    runs = Runs()
    trace_scalars(golden, "golden", runs)
    if actual is not None:
        trace_scalars(actual, "actual", runs)
    if result is not None:
        error_scalars(result, "actual", runs)
    try:
        write_runs(runs, folder)
    except OSError as exc:
        raise UsageError("cannot write the TensorBoard runs under %s: %s" % (folder, exc.strerror or exc)) from None
    return TensorBoardExport(folder, {run: len(tags) for run, tags in runs.runs.items()})


def read_scalars(folder: str) -> Dict[str, Dict[str, Series]]:
    """Read back what export_tensorboard wrote (for checks): run -> tag -> points."""
    import tensorflow as tf
    from tensorflow.core.util import event_pb2

    out: Dict[str, Dict[str, Series]] = {}
    for run in sorted(os.listdir(folder)):
        directory = os.path.join(folder, run)
        for name in sorted(os.listdir(directory)):
            for record in tf.data.TFRecordDataset(os.path.join(directory, name)):
                event = event_pb2.Event.FromString(record.numpy())
                for value in event.summary.value:
                    number = float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") else value.simple_value
                    out.setdefault(run, {}).setdefault(value.tag, []).append((event.step, number))
    return out

