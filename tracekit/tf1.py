"""tracekit for legacy TF1 code: `tracekit.tf1.record(...)`, the recorder (tracekit.record) made
from what a user declares."""

from typing import Any, Mapping, Optional

from .record import Recorder, SeedMode, SeedReuseError, StopRecording
from .record.declared import Declared
from .taps import tap

__all__ = ["Recorder", "SeedMode", "SeedReuseError", "StopRecording", "record", "tap"]


def record(path: str, *, seed: Optional[int] = None, seed_mode: "str | SeedMode | None" = None, every: int = 1,
           steps: Optional[int] = None, meta: Optional[Mapping[str, Any]] = None, loss: Any = None,
           learning_rate: Any = None, train_op: Any = None, gradients: Optional[Mapping[Any, Any]] = None,
           worker: Optional[int] = None, budget: "int | str | None" = None, digests: bool = True,
           loss_parts: bool = False, **options: Any) -> Recorder:
    """Record TF1 training into the golden at `path`. A context manager:

        with tracekit.tf1.record("goldens/run.h5", seed=1) as rec:
            sess = rec.session(tf.compat.v1.Session())   # or hooks=[rec.hook()]
            ...train...

    seed: graph seed to set; seed_mode: "constant" or "num_random_ops" to control every
    random op's seeds as tf.compat.v1.keras.utils.DeterministicRandomTestTool does (build
    the graph inside the context); every: keep gradients, taps and variables whole every K-th
    step and at the last (when `steps` says which), as digests in between (inputs, random draws,
    loss and learning rate whole at every step; digests=False keeps nothing of the rest in
    between); steps: stop recording after this many steps; budget: a size ("500MB") the golden
    stays under, keyframes and what they keep chosen for it (without steps, as the run goes:
    record/keyframes.py);
    meta: your own metadata, stored under "user".
    loss / learning_rate / train_op / gradients: what the recorder cannot find on its own
    (a step whose gradient is written out by hand, a learning rate it misses), as graph
    names or the tensors and ops themselves, one or a list; gradients as {variable:
    gradient}. A declared train op makes every run that executes it a step.
    worker: in parameter-server training, record the steps of this worker task (the runs placed
    on /job:worker/task:N): one recording per worker. By default, the first graph that trains.
    A SyncReplicasOptimizer worker's step is its push of gradients; the chief's run applying
    them waits for the workers and is not a step.
    loss_parts: where a loss is a sum of parts times constants, record each part's value too, so
    a replay can name a slip in one part. Fetching the parts may change how TensorFlow's graph
    optimizer sums the loss (slim_resnet's total loss moved by an ulp), so it is asked for.
    """
    declared = Declared.of(loss, learning_rate, train_op, gradients)
    return Recorder(path, seed=seed, seed_mode=seed_mode, every=every, steps=steps, meta=meta, declared=declared,
                    worker=worker, budget=budget, digests=digests, loss_parts=loss_parts, **options)
