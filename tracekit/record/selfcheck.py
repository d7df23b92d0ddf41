"""The recorder checks its own claim about the loss, at the first step of each kind.

The claim: the tensor recorded as a run's loss is the one its gradients were taken of. The
check: in a copy of the graph (its own session, so the program's graph and random streams are
untouched), load the state the step started from, feed the step's recorded inputs and random
draws, differentiate the recorded loss with respect to the variables the step updated, and
hold the result to the gradients the step's differentiation gave (fetched along with the step,
before any clipping). A recomputation of the same graph on the same machine differs from the
run by round-off only; a missed addend changes the gradients of every variable it reads by
its own size.

Where the loss fails, the check looks among the candidates (the totals the loss is part of,
the other losses noted) for the tensor whose gradients do match, and the recorder records that
one instead. Where nothing can be checked (the copy cannot be run: a feed inside a loop, a
table that cannot be initialized), the loss is recorded as unverified, with the reason.
Python 3.7 syntax.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

VERIFIED, REPLACED, UNVERIFIED, FAILED = "verified", "replaced", "unverified", "failed"
# |recomputed - run's| allowed per variable: of its own gradient's size, and of the largest of
# the step's gradients (a gradient that is round-off, a bias before batch norm, is judged by the
# model's scale, not its own).
OWN, MODEL = 1e-4, 1e-6
# Beyond round-off but under this share of the largest gradient, no loss is named wrong: a missed
# term changes gradients by its own size, while a TF1 run whose Grappler duplicated a fetched
# gradient off the update's path (it then reads the variable after its update) is off by about
# one update's worth (the audit shows which).
GROSS = 1e-2
LOAD_BYTES = 128 << 20  # of the state a copy's load feeds in one run (GraphCopy.load)


@dataclass(frozen=True)
class LossCheck:
    """The check of one recorded loss at one step."""

    key: str  # "loss/loss"
    tensor: str  # the graph tensor recorded under `key` after the check
    verdict: str  # VERIFIED, REPLACED, UNVERIFIED or FAILED
    step: int
    detail: str
    variables: int = 0  # gradients compared
    max_error: Optional[float] = None  # the largest |recomputed - run's| of a gradient, over its allowance
    value: Optional[float] = None  # with REPLACED: the step's value of the new loss, from the state it started from
    original: str = ""  # with REPLACED: the tensor first taken
    failing: Tuple[str, ...] = ()  # FAILED: the variables whose gradients are off by more than round-off

    def to_meta(self) -> Dict[str, Any]:
        out = {"key": self.key, "tensor": self.tensor, "verdict": self.verdict, "step": self.step,
               "detail": self.detail, "variables": self.variables, "max_error": self.max_error}
        if self.original:
            out["original"] = self.original
        return out


@dataclass
class StepSnapshot:
    """What the check needs of a step: the state it started from (variable name -> value), what it
    was fed and drew (graph tensor name -> value) and each loss's gradients as the step's
    differentiation gave them (loss key -> {variable name: dense value})."""

    step: int
    state: Mapping[str, Any]
    feeds: Mapping[str, Any]
    gradients: Mapping[str, Mapping[str, np.ndarray]]
    exact: bool  # the gradients are the differentiation's own (noted), not the update's (maybe transformed)
    racy: Sequence[str] = ()  # variables whose gradient reads what the step's updates change, unordered: left out


def check_losses(copy: "GraphCopy", losses: Mapping[str, Any], candidates: Mapping[str, Sequence[Any]],
                 snapshot: StepSnapshot) -> List[LossCheck]:
    """Check each loss (key -> graph tensor) of one step in `copy` (of the step's graph, made with
    GraphCopy.of); `candidates`: key -> tensors to try where the loss fails (nearest first)."""
    try:
        copy.load(snapshot.state, snapshot.feeds)
    except Exception as exc:  # the copy cannot be loaded: nothing is known
        reason = "the graph's copy could not be loaded to recompute it (%s: %s)" % (type(exc).__name__,
                                                                                  _first_line(exc))
        return [LossCheck(key, tensor.name, UNVERIFIED, snapshot.step, reason) for key, tensor in losses.items()]
    return [_check(copy, key, tensor, list(candidates.get(key, ())), snapshot) for key, tensor in losses.items()]


def _check(copy: "GraphCopy", key: str, loss: Any, candidates: List[Any], snapshot: StepSnapshot) -> LossCheck:
    wanted = snapshot.gradients.get(key) or {}
    step = snapshot.step
    if not wanted:
        why = ("every gradient of it reads variables the step's own updates change, unordered (a race: see the "
               "golden's races)" if snapshot.racy else "no gradient of it was fetched to check it against")
        return LossCheck(key, loss.name, UNVERIFIED, step, why)
    unracy = "" if not snapshot.racy else " (%d racy gradients left out)" % len(snapshot.racy)
    tried: List[str] = []
    first: Optional[Tuple[float, str]] = None
    near = False  # the loss's own gradients are off by more than round-off, but far less than a term
    failing: Tuple[str, ...] = ()
    for tensor in [loss] + [c for c in candidates if c.name != loss.name]:
        try:
            worst, where, count, value, gross, over = copy.gradient_error(tensor.name, wanted)
        except Exception as exc:
            if tensor is loss:
                return LossCheck(key, loss.name, UNVERIFIED, step, "its gradients could not be recomputed (%s: %s)"
                                 % (type(exc).__name__, _first_line(exc)))
            tried.append("%s (not computable: %s)" % (tensor.name, type(exc).__name__))
            continue
        if worst <= 1.0:
            if tensor is loss:
                return LossCheck(key, loss.name, VERIFIED, step,
                                 "its gradients recomputed match the step's for %d variables%s" % (count, unracy),
                                 count, worst)
            return LossCheck(key, tensor.name, REPLACED, step,
                             "%s is not what the step differentiated (%s); %s is: its gradients match the step's "
                             "for %d variables" % (loss.name, first[1] if first else "", tensor.name, count),
                             count, worst, value, original=loss.name)
        if first is None:
            first = (worst, "%s's gradient is off by %.3g times the round-off allowed" % (where, worst))
            near = gross < GROSS
            failing = tuple(over)
        tried.append("%s (%s off by %.3g times the round-off allowed)" % (tensor.name, where, worst))
    verdict = FAILED if snapshot.exact and not near else UNVERIFIED
    detail = ("the gradients the step took are not those of %s nor of any candidate tried: %s" % (
        loss.name, "; ".join(tried)))
    if near:
        detail += ("; %s's are off by less than %g of the step's largest gradient: no term is missing, but the "
                   "step's gradients are not its recomputation (a gradient fetched off the update's path, read after "
                   "the update: the audit says whether the update agrees)" % (loss.name, GROSS))
    if not snapshot.exact:
        detail += ("; the gradients compared are those the updates read, which the program may have transformed "
                   "after differentiating")
    return LossCheck(key, loss.name, verdict, step, detail, len(wanted), first[0] if first else None,
                     failing=failing)


class GraphCopy:
    """The recorded graph again, in a graph and session of its own, loaded with a step's starting
    state and fed its inputs and draws: the program's own graph, session and random streams are
    untouched."""

    def __init__(self, tf: Any, graph: Any, prebuilt: Optional[Mapping[str, Mapping[str, str]]] = None) -> None:
        self._tf = tf
        # loss name -> {variable name: its gradient's tensor name}, built in the program's graph
        # where the copy cannot differentiate (a custom gradient that rebuilds its layers)
        self.prebuilt = dict(prebuilt or {})
        v1 = tf.compat.v1
        self.version = graph.version  # what it copied
        keys = v1.GraphKeys
        # only what the copy needs: a library's own collections may name ops no import can find
        meta = v1.train.export_meta_graph(graph=graph, collection_list=[
            keys.GLOBAL_VARIABLES, keys.LOCAL_VARIABLES, keys.TRAINABLE_VARIABLES, keys.TABLE_INITIALIZERS,
            "cond_context", "while_context"])
        self.graph = tf.Graph()
        with self.graph.as_default():
            v1.train.import_meta_graph(meta, clear_devices=True)
            variables: Dict[str, Any] = {}
            for collection in (v1.GraphKeys.GLOBAL_VARIABLES, v1.GraphKeys.LOCAL_VARIABLES):
                for variable in self.graph.get_collection(collection):
                    variables.setdefault(variable.name, variable)
            self._variables = variables
            self._tables = v1.tables_initializer()
        self.session = v1.Session(graph=self.graph)
        self._feeds: Dict[Any, Any] = {}
        self._reads: Dict[str, Any] = {}  # variable name -> a tensor reading it (rerun)
        self._started = False

    @classmethod
    def of(cls, tf: Any, graph: Any, prebuilt: Optional[Mapping[str, Mapping[str, str]]] = None
           ) -> "Optional[GraphCopy] | str":
        """A copy of `graph`, or why none can be made."""
        try:
            return cls(tf, graph, prebuilt)
        except Exception as exc:
            return "the graph could not be copied (%s: %s)" % (type(exc).__name__, _first_line(exc))

    def load(self, state: Mapping[str, Any], feeds: Mapping[str, Any]) -> None:
        """Set the variables to `state` (variable name -> value; the others as the program starts
        them) and what later runs feed (graph tensor name -> value). A run takes up to LOAD_BYTES
        of the state: TensorFlow copies what it is fed, so one run would hold the model's state
        twice over while it assigns."""
        # the variables not in the recorded state (a metric's counters) start as the program starts them
        rest = [] if self._started else [variable.initializer for name, variable in self._variables.items()
                                         if name not in state] + [self._tables]
        chunks = self._chunks([name for name in self._variables if name in state]) or [[]]
        for chunk in chunks:  # the same runs at every load: their executors are made once
            initializers = [self._variables[name].initializer for name in chunk]  # its initial value fed: no op added
            self.session.run(initializers + (rest if chunk is chunks[-1] else []),
                             {i.inputs[1]: np.asarray(state[name]) for i, name in zip(initializers, chunk)})
        self._started = True
        self._feeds = {self.graph.get_tensor_by_name(name): value for name, value in feeds.items()}

    def evaluate(self, names: Sequence[str]) -> List[Any]:
        """The values of graph tensors `names` at the loaded state and feeds."""
        return self.session.run([self.graph.get_tensor_by_name(n) for n in names], self._feeds)

    def rerun(self, ops: Sequence[str], read: Sequence[str],
              kept: Optional[Callable[[str, np.ndarray], np.ndarray]] = None) -> Dict[str, np.ndarray]:
        """Run the ops named `ops` at the loaded state and feeds; the values of the variables named
        `read` after them, read LOAD_BYTES at a time, each passed through `kept` (name, value) ->
        the value to keep where given (an equal array already held: the copy read is let go)."""
        self.session.run([self.graph.get_operation_by_name(name) for name in ops], self._feeds)
        with self.graph.as_default():  # a read of each, made once
            for name in read:
                if name not in self._reads:
                    self._reads[name] = self._variables[name].value()
        out: Dict[str, np.ndarray] = {}
        for chunk in self._chunks(read):
            for name, value in zip(chunk, self.session.run([self._reads[name] for name in chunk])):
                out[name] = value if kept is None else kept(name, value)
        return out

    def _chunks(self, names: Sequence[str]) -> List[List[str]]:
        """`names` in runs of up to LOAD_BYTES of their variables (the same runs for the same names)."""
        chunks: List[List[str]] = [[]]
        size = 0
        for name in names:
            shape = self._variables[name].shape
            size += (int(np.prod(shape.as_list(), dtype=np.int64)) if shape.is_fully_defined() else 0) * \
                self._variables[name].dtype.base_dtype.size
            chunks[-1].append(name)
            if size >= LOAD_BYTES:
                chunks.append([])
                size = 0
        return [chunk for chunk in chunks if chunk]

    def close(self) -> None:
        self.session.close()

    def gradient_error(self, loss_name: str,
                       wanted: Mapping[str, np.ndarray]) -> Tuple[float, str, int, float, float, List[str]]:
        """(the worst gradient's error over its allowance, its variable, how many compared, the
        loss's value, the largest error over the largest gradient, the variables over their
        allowance) of `loss_name` against `wanted`."""
        missing = [n for n in wanted if n not in self._variables]
        if missing:
            raise KeyError("variables not in the copy: %s" % ", ".join(missing[:3]))
        with self.graph.as_default():
            loss = self.graph.get_tensor_by_name(loss_name)
            names = list(wanted)
            built = self.prebuilt.get(loss_name)
            if built is not None:
                grads = [self.graph.get_tensor_by_name(built[n]) if built.get(n) else None for n in names]
            else:
                grads = self._tf.gradients(loss, [self._variables[name] for name in names])
        fetch = [loss] + [g for g in grads if g is not None]
        got = self.session.run(fetch, self._feeds)
        value, values = got[0], iter(got[1:])
        scale = max([float(np.max(np.abs(wanted[n]))) if np.size(wanted[n]) else 0.0 for n in names] + [0.0])
        worst, where, largest, over = 0.0, "", 0.0, []
        for name, grad in zip(names, grads):
            expected = np.asarray(wanted[name], np.float64)
            actual = np.zeros_like(expected) if grad is None else _dense(next(values), expected.shape)
            allowed = OWN * float(np.max(np.abs(expected))) + MODEL * scale if expected.size else 0.0
            error = float(np.max(np.abs(actual - expected))) if expected.size else 0.0
            ratio = error / allowed if allowed > 0 else (0.0 if error == 0 else float("inf"))
            if ratio > worst or not where:
                worst, where = ratio, name
            if ratio > 1.0:
                over.append(name)
            largest = max(largest, error)
        gross = largest / scale if scale > 0 else (0.0 if largest == 0 else float("inf"))
        return (worst, where, len(names), float(np.asarray(value).reshape(-1)[0]) if np.size(value) else 0.0, gross,
                over)


def dense(value: Any, shape: Optional[Sequence[int]] = None) -> np.ndarray:
    """A gradient as fetched (an array, or IndexedSlicesValue: rows and their ids, repeats summed)
    as a dense float64 array."""
    return _dense(value, shape)


def _dense(value: Any, shape: Optional[Sequence[int]]) -> np.ndarray:
    if hasattr(value, "indices") and hasattr(value, "values"):
        rows = np.asarray(value.values, np.float64)
        full = tuple(int(d) for d in value.dense_shape) if getattr(value, "dense_shape", None) is not None \
            else tuple(shape or ())
        out = np.zeros(full, np.float64)
        np.add.at(out, np.asarray(value.indices), rows)
        return out
    return np.asarray(value, np.float64)


class Rows:
    """A sparse gradient as an optimizer's update op took it: rows and their ids."""

    def __init__(self, values: Any, indices: Any, dense_shape: Any = None) -> None:
        self.values, self.indices, self.dense_shape = values, indices, dense_shape


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""


def prebuild(graph: Any, losses: Mapping[str, Any], variables: Mapping[str, Sequence[str]]
             ) -> Optional[Dict[str, Dict[str, str]]]:
    """Each loss's gradients (key -> the loss tensor; `variables`: key -> the variables the step
    updated), built in the program's own graph under a scope of the recorder's and never run
    there: a copy of the graph then evaluates them. For gradients the copy cannot take itself (a
    custom gradient that rebuilds its layers through variable scopes the copy lacks). None where
    the graph takes no more ops (finalized by a MonitoredSession) or the gradients cannot be built."""
    if getattr(graph, "finalized", False):
        return None
    from tensorflow.python.ops import gradients_impl  # the unpatched tf.gradients: nothing noted of these
    built: Dict[str, Dict[str, str]] = {}
    try:
        with graph.as_default(), graph.name_scope("tracekit_selfcheck"):
            for key, loss in losses.items():
                found = {v.name: v for v in _global_variables(graph)}
                names = [n for n in variables.get(key, ()) if n in found]
                grads = gradients_impl.gradients(loss, [found[n] for n in names])
                built[loss.name] = {n: _values_name(g) for n, g in zip(names, grads) if g is not None}
    except Exception:  # the claim stays unverified, with the first reason
        return None
    return built


def _global_variables(graph: Any) -> List[Any]:
    from tensorflow.python.framework import ops
    return graph.get_collection(ops.GraphKeys.GLOBAL_VARIABLES)


def _values_name(grad: Any) -> str:
    """A gradient's tensor name (an IndexedSlices: its dense conversion, made here)."""
    if hasattr(grad, "indices"):
        from tensorflow.python.framework import ops
        grad = ops.convert_to_tensor(grad)
    return grad.name
