"""Replay under a tf.distribute strategy: the golden's global batch split across replicas
as the port's input pipeline would split it, and what the replicas computed joined back
into the cross-replica values the golden holds.

Splitting goes through TensorFlow itself (`experimental_distribute_dataset`, or
`distribute_datasets_from_function` with contiguous per-replica slices), with a row
number travelling beside the inputs: each replica's row numbers say which rows of the
global batch it got, whatever the strategy, worker count or partial batch. The random
tape slices the golden's draws by them and a replica's batch-shaped values are put back
in row order by them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..errors import ReplayError, UsageError
from ..keys import replica_name
from .tf_import import tf

ROWS = "__tracekit_rows__"  # the row numbers' entry in a distributed element


def logical_cpus(count: int) -> List[str]:
    """Split this process's CPU into `count` logical devices (for MirroredStrategy on a machine
    without GPUs) and return their names. TensorFlow allows it only before its runtime starts:
    call it first thing (a conftest.py's top, before any TensorFlow op)."""
    if int(count) < 1:
        raise UsageError("logical_cpus needs a count >= 1, got %r" % (count,))
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * int(count))
    except RuntimeError:  # the runtime has started: its devices are fixed
        have = tf.config.list_logical_devices("CPU")
        if len(have) < count:
            raise UsageError(
                "logical_cpus(%d) came too late: TensorFlow's runtime has started with %d logical CPU device(s), "
                "and its devices cannot change now. Call tracekit.tf2.logical_cpus(%d) before any TensorFlow op runs "
                "(at the top of conftest.py, or first in the script)" % (count, len(have), count)) from None
    return [d.name for d in tf.config.list_logical_devices("CPU")][:int(count)]


def mirrored(devices: "int | Sequence[str]", **options: Any) -> Any:
    """A tf.distribute.MirroredStrategy over `devices` (a count: that many logical CPUs, see
    logical_cpus) that can live beside other strategies in one process, as in a test suite:
    each MirroredStrategy numbers its all-reduces from the same start, so the second one's
    meet the first one's ("Shape mismatch in the collective instance"); this one starts past
    them (as TensorFlow's own tests do). `options` go to MirroredStrategy."""
    names = logical_cpus(devices) if isinstance(devices, int) else list(devices)
    tf.distribute.MirroredStrategy._collective_key_base += 100000  # read when a strategy is built
    return tf.distribute.MirroredStrategy(names, **options)


def replica_id() -> Optional[int]:
    """The global id (replica_id_in_sync_group) of the replica whose function runs or is traced
    now; None outside a strategy's replica function."""
    if not tf.distribute.has_strategy() or tf.distribute.in_cross_replica_context():
        return None
    context = tf.distribute.get_replica_context()
    value = getattr(context, "_replica_id_in_sync_group", None)
    if not isinstance(value, int):
        value = tf.get_static_value(context.replica_id_in_sync_group)
    return None if value is None else int(value)


def _devices(strategy: Any) -> List[str]:
    """This worker's devices; the default strategy has none of its own (TF places each op)."""
    try:
        return list(strategy.extended.worker_devices)
    except RuntimeError:
        return ["default placement"]


def _reduction(strategy: Any) -> str:
    """How the strategy all-reduces: its cross-device ops' class (the default strategy: none)."""
    extended = strategy.extended
    ops = getattr(extended, "_cross_device_ops", None) or getattr(extended, "_collective_ops", None)
    if ops is not None:
        return type(ops).__name__
    return "none" if strategy.num_replicas_in_sync == 1 else "unknown"


@dataclass
class Layout:
    """Where a replay ran: the strategy, its replicas (all workers) and this worker's devices."""

    strategy: str
    replicas: int
    workers: int
    worker: int
    devices: List[str]
    reduction: str
    input: str
    global_batch_size: int

    def to_meta(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class StepFacts:
    """What the replicas did in one step, beyond their values: read by the comparison's hints."""

    not_reduced: List[str] = field(default_factory=list)  # grads each replica applied on its own
    reduced_twice: List[str] = field(default_factory=list)  # grads all-reduced by the step, then again


class Distribution:
    """One replay's strategy: splits each step's inputs, joins what the replicas computed."""

    def __init__(self, strategy: Any, api: str, global_batch_size: int) -> None:
        self.strategy = strategy
        self.api = api
        self.global_batch_size = int(global_batch_size)
        replicas = strategy.num_replicas_in_sync
        if api == "function" and self.global_batch_size % replicas:
            raise UsageError("input_api='function' gives each replica global_batch_size / replicas rows: %d rows do not "
                             "split over %d replicas (pass global_batch_size=, or input_api='dataset')"
                             % (self.global_batch_size, replicas))
        ids = strategy.run(lambda: tf.distribute.get_replica_context().replica_id_in_sync_group)
        self.local_ids = [int(v) for v in strategy.experimental_local_results(ids)]  # this worker's replicas
        resolver = getattr(strategy, "cluster_resolver", None)
        worker = int(getattr(resolver, "task_id", 0) or 0) if resolver is not None else 0
        workers = max(1, replicas // max(1, len(self.local_ids)))
        self.layout = Layout(type(strategy).__name__, replicas, workers, worker, _devices(strategy),
                             _reduction(strategy), api, self.global_batch_size)
        self.rows: Dict[int, np.ndarray] = {}  # this step's: replica id -> row numbers of the global batch
        self.batch = 0  # this step's batch size

    # ---- inputs ---------------------------------------------------------------------------------

    def distribute(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, Any]:
        """The step's inputs as the strategy hands them to the port's step: {name: PerReplica
        value} for the batched inputs (leading dimension: the step's batch), plain tensors for
        the rest (every replica sees them whole)."""
        n = batch_size(feeds)
        if n > self.global_batch_size:
            raise ReplayError("a step's batch has %d rows, more than global_batch_size=%d: pass the port's global "
                              "batch size" % (n, self.global_batch_size))
        batched = {k: v for k, v in feeds.items() if np.ndim(v) >= 1 and np.shape(v)[0] == n}
        element = dict(batched)
        element[ROWS] = np.arange(n, dtype=np.int64)
        if self.api == "dataset":
            dataset = tf.data.Dataset.from_tensor_slices(element).batch(self.global_batch_size)
            distributed = self.strategy.experimental_distribute_dataset(dataset)
        else:
            distributed = self.strategy.distribute_datasets_from_function(
                lambda context: _pipeline(context, element, self.global_batch_size))
        value = dict(next(iter(distributed)))
        rows = self.strategy.experimental_local_results(value.pop(ROWS))
        self.rows = {rid: np.asarray(r.numpy(), dtype=np.int64) for rid, r in zip(self.local_ids, rows)}
        self.batch = n
        value.update((k, tf.constant(v)) for k, v in feeds.items() if k not in batched)
        return value

    # ---- what the replicas computed -------------------------------------------------------------

    @property
    def complete(self) -> bool:
        """This worker's replicas got every row of the step's batch (one worker)."""
        return sum(len(r) for r in self.rows.values()) == self.batch

    def join_batch(self, per_replica: Mapping[int, np.ndarray]) -> Optional[np.ndarray]:
        """One batch-shaped value from each local replica -> the global batch's, rows in order;
        None if they are not batch-shaped (a per-replica scalar) or rows are on another worker."""
        if set(per_replica) != set(self.rows) or not self.complete:
            return None
        first = next(iter(per_replica.values()))
        for rid, value in per_replica.items():
            if np.ndim(value) < 1 or np.shape(value)[0] != len(self.rows[rid]) or \
                    np.shape(value)[1:] != np.shape(first)[1:]:
                return None
        out = np.empty((self.batch,) + tuple(np.shape(first)[1:]), dtype=first.dtype)
        for rid, value in per_replica.items():
            out[self.rows[rid]] = value
        return out

    def slice_draw(self, value: np.ndarray, shape: Tuple[int, ...], replica: int) -> Optional[np.ndarray]:
        """The part of a recorded draw of the global batch that `replica` draws (asking for
        `shape`): its rows along the batch axis; the whole draw if it has none; None if the
        shapes do not correspond."""
        rows = self.rows.get(replica)
        axis = _batch_axis(value.shape, shape, self.batch, None if rows is None else len(rows))
        if axis is None:
            return value if tuple(value.shape) == tuple(shape) else None
        return np.take(value, rows, axis=axis)

    def join_draws(self, recorded: Sequence[Tuple[int, ...]], draws: Mapping[int, List[np.ndarray]]) -> List[np.ndarray]:
        """The replicas' i-th draws -> one draw shaped as the golden's i-th (`recorded` shapes),
        rows put back in order; replica 0's (the lowest id's) where a draw has no batch axis."""
        out = []
        count = max((len(d) for d in draws.values()), default=0)
        for i in range(count):
            parts = {rid: d[i] for rid, d in draws.items() if i < len(d)}
            lowest = parts[min(parts)]
            golden = recorded[i] if i < len(recorded) else lowest.shape
            axis = _batch_axis(golden, lowest.shape, self.batch, len(self.rows.get(min(parts), ())))
            if axis is None or set(parts) != set(self.rows):
                out.append(lowest)
                continue
            moved = {rid: np.moveaxis(v, axis, 0) for rid, v in parts.items()}
            joined = self.join_batch(moved)
            out.append(lowest if joined is None else np.moveaxis(joined, 0, axis))
        return out

    def join_gradient(self, key: str, applied: Mapping[int, np.ndarray], passed: Mapping[int, np.ndarray],
                      aggregated: bool, facts: StepFacts) -> np.ndarray:
        """What the optimizer applied, from each local replica: `applied` is the all-reduced
        gradient when the optimizer all-reduces (equal on every replica), else what each replica
        passed (they must agree: the lowest id's is kept, a disagreement noted). `passed`: what
        the step passed, to tell a gradient the step had all-reduced already."""
        ordered = [applied[rid] for rid in sorted(applied)]
        if not aggregated:
            if any(not np.array_equal(ordered[0], v) for v in ordered[1:]):
                facts.not_reduced.append(key)
            return ordered[0]
        replicas = self.layout.replicas
        given = [passed[rid] for rid in sorted(passed)]
        if replicas > 1 and given and np.any(ordered[0]) and all(
                np.allclose(replicas * np.asarray(g, np.float64), ordered[0], rtol=1e-4, atol=0) for g in given):
            facts.reduced_twice.append(key)  # every replica passed the sum already: it is summed again
        return ordered[0]


def batch_size(feeds: Mapping[str, np.ndarray]) -> int:
    """A step's batch: the leading dimension most of its inputs share (the largest on a tie)."""
    counts: Dict[int, int] = {}
    for value in feeds.values():
        if np.ndim(value) >= 1:
            counts[np.shape(value)[0]] = counts.get(np.shape(value)[0], 0) + 1
    if not counts:
        raise ReplayError("under a strategy the step's inputs must have a batch dimension to split; this step's "
                          "inputs are all scalars")
    return max(counts, key=lambda n: (counts[n], n))


def _batch_axis(golden: Sequence[int], replica: Sequence[int], batch: int, rows: Optional[int]) -> Optional[int]:
    """The axis along which a replica's draw is its rows of the global batch's: the first where
    the golden has `batch` and the replica `rows`, every other axis equal."""
    if rows is None or len(golden) != len(replica):
        return None
    for axis, (g, r) in enumerate(zip(golden, replica)):
        if g == batch and r == rows and all(a == b for i, (a, b) in enumerate(zip(golden, replica)) if i != axis):
            return axis
    return None


def _pipeline(context: Any, element: Mapping[str, np.ndarray], global_batch_size: int) -> Any:
    """input='function': this input pipeline's replicas get consecutive slices of
    context.get_per_replica_batch_size(global) rows, in replica order (worker 0's first)."""
    per_replica = context.get_per_replica_batch_size(global_batch_size)
    local = context.num_replicas_in_sync // context.num_input_pipelines
    start = context.input_pipeline_id * local * per_replica
    part = {k: v[start:start + local * per_replica] for k, v in element.items()}
    return tf.data.Dataset.from_tensor_slices(part).batch(per_replica)


def unsynchronized_batch_norm(model: Any) -> List[str]:
    """The model's batch-norm layers that normalize each replica's batch on its own."""
    modules = getattr(model, "submodules", None) or []
    out = []
    for module in modules:
        cls = type(module).__name__
        if "BatchNormalization" in cls and "Sync" not in cls and not getattr(module, "synchronized", False):
            out.append(getattr(module, "name", cls))
    return out


def mirrored_values(variable: Any) -> Optional[List[np.ndarray]]:
    """Each local replica's copy of a mirrored (on-write) variable; None for anything else
    (a plain variable, or a sync-on-read one, whose copies may differ until read)."""
    values = getattr(variable, "values", None)
    policy = getattr(variable, "_policy", None)
    if not isinstance(values, tuple) or len(values) < 2:
        return None
    if (policy is not None and "OnRead" in type(policy).__name__) or "SyncOnRead" in type(variable).__name__:
        return None
    return [np.asarray(v.numpy()) for v in values]


def disagreeing_copies(key: str, variable: Any, local_ids: Sequence[int],
                       convert: Any = None) -> List[Tuple[str, np.ndarray]]:
    """("kind/name@replica<id>", value) of each local copy of a mirrored variable that differs
    from the first replica's: a port whose replicas went apart (each applied its own gradient)
    shows there. `convert` maps a copy as the variable's value is mapped (TF1 slot terms)."""
    copies = mirrored_values(variable)
    if copies is None:
        return []
    if convert is not None:
        copies = [convert(c) for c in copies]
    kind, _, name = key.partition("/")
    return [("%s/%s" % (kind, replica_name(name, rid)), c) for rid, c in zip(local_ids, copies)
            if not np.array_equal(c, copies[0])]
