"""The TF1 recorder: turns the training steps a session runs into a golden trace.

Every way legacy code reaches TensorFlow ends in the raw session's `run` or, for
TF1 Keras `fit`, in `_make_callable_from_options`; the recorder intercepts those
two (and `make_callable`) on the sessions it is attached to, or on every session
(`attach_all`, the zero-code mode). A run that executes an optimizer update is a
step: the recorder fetches, in that same run, what the graph computes anyway
(inputs, random draws, taps, loss, learning rate, gradients; graph.py), then
reads the variables in a run of its own. Other runs pass through untouched.
sessions.py reads the calls (fetches, feeds, the session inside a MonitoredSession).
"""

from __future__ import annotations

import collections
import functools
import logging
import os
import sys
import threading
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..environment import program_identity
from ..tf_environment import tensorflow_environment
from ..errors import MissingDependency, RecordError, UsageError
from ..keys import DRAWS, REGULARIZATION_LOSSES, WARNINGS, make_key, split_key
from ..store import create, provenance
from ..store.meta import RecordingMeta
from ..store.raced import raced
from ..store.values import estimate_stored
from . import counter_reads, inputs, keyframes, optimizer, terms
from .graph_digests import GraphDigests, InGraph, assembled
from .accumulation import MicroBatches, held_with
from .declared import Declared
from .graph import GraphModel, StepPlan
from .kinds import Kinds
from .regenerated import Regenerated
from .seeds import SeedControl, SeedMode
from .state import RecordedState, named
from .intercept import Patches
from .callables import KerasCallable
from .sessions import as_consumed, as_op, element_name, flatten_fetches, make_hook, recorded, storable, unfetched
from .walk import taken
from .witness import Witness

LOG = logging.getLogger(__name__)  # the golden's warnings, as the recording closes


class StopRecording(BaseException):
    """Raised into a script recorded with a step limit once the limit is reached
    (a BaseException, so the script's own `except Exception` does not swallow it)."""


class Recorder:
    """Use `tracekit.tf1.record(path, ...)`; see there."""

    def __init__(self, path: str, seed: Optional[int] = None, seed_mode: "str | SeedMode | None" = None,
                 every: int = 1, steps: Optional[int] = None, meta: Optional[Mapping[str, Any]] = None,
                 stop_script: bool = False, program: Optional[str] = None,
                 progress: Optional[Callable[[int, Optional[int]], None]] = None,
                 declared: Optional[Declared] = None, worker: Optional[int] = None,
                 budget: "int | str | None" = None, digests: bool = True, loss_parts: bool = False,
                 **writer_options: Any) -> None:
        if int(every) < 1:
            raise UsageError("every must be >= 1 (record every K-th step in full), got %r" % (every,))
        if steps is not None and int(steps) < 1:
            raise UsageError("steps must be >= 1, got %r" % (steps,))
        mode = SeedMode.parse(seed_mode)
        if mode is not None and seed is None:
            seed = 42  # the DeterministicRandomTestTool's default
        self.path = path
        self.declared = declared or Declared()
        self.loss_parts = bool(loss_parts)  # fetch the parts of a loss that is a sum (record/terms.py)
        self.worker = None if worker is None else int(worker)
        self.seed = seed
        self.seed_mode = mode
        self.every = int(every)
        self.steps_limit = None if steps is None else int(steps)
        # Keyframes every K steps and the last; digests between (planned at step 0 with a budget).
        self._schedule = keyframes.Schedule(self.every, self.steps_limit, bool(digests),
                                            None if budget is None else keyframes.parse_size(budget))
        self.stop_script = stop_script
        # The script that records: two recordings of it are the same code (compare's profiles).
        self.program = program or getattr(sys.modules.get("__main__"), "__file__", None)
        self._user_meta = dict(meta or {})
        self._writer_options = writer_options
        self._tf: Any = None
        self._writer: Any = None
        self._seeds: Optional[SeedControl] = None
        self._models: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        # _lock guards the books (graph models, the recorded graph) for a moment; _step_lock makes steps
        # one at a time, held across a step's run. Other threads' runs (queue runners feeding the step)
        # take only _lock, so they go on while a step waits for them.
        self._lock = threading.RLock()
        self._step_lock = threading.RLock()
        self._local = threading.local()
        self._patches = Patches(self)
        self._graph: Any = None  # the graph whose steps are recorded
        self._state = RecordedState()  # the variables it keeps, and what runs between steps changed (state.py)
        self._kinds = Kinds()  # what the metadata says of the kinds of step seen (kinds.py)
        self._parts = terms.Kept()  # the losses whose parts each kind of step keeps (terms.py)
        self._micro = MicroBatches()  # the micro-batch runs of the coming step (accumulation.py)
        self._drawn = Regenerated()  # the draws kept as their generator's state (regenerated.py)
        self._witness: Any = None  # what it checks of the steps (witness.py), made on entering
        self._in_graph: Optional[InGraph] = None  # digest ops added to the recorded graph
        self.steps = 0
        self.done = False
        self.warnings: List[str] = []  # what the golden's metadata warns of, on closing (also logged)
        self._progress = progress  # (steps recorded, steps asked for or None), after each step

    # ---- the context --------------------------------------------------------------------------

    def __enter__(self) -> "Recorder":
        try:
            import tensorflow as tf
        except ImportError as exc:
            raise MissingDependency(
                "recording needs the TensorFlow the legacy code runs on, which does not import here (%s): on "
                "Python 3.7, pip install 'tracekit[legacy]' (TensorFlow 1.15.5, protobuf < 3.21)" % exc) from None

        self._tf = tf
        # The session's own run, for the recorder's reads (captured before any patching).
        self.base_run = tf.compat.v1.Session.__mro__[1].__dict__["run"]
        meta = {"user": self._user_meta, "recording": self._recording_meta(),
                "program": program_identity(os.path.basename(self.program) if self.program else "<interactive>",
                                            [self.program] if self.program else []),
                provenance.META_KEY: provenance.recording_meta()}
        if self.declared:
            meta["declared"] = self.declared.to_meta()

        self._writer = create(self.path, meta=meta, **self._writer_options)
        self._witness = Witness(tf, self.path)
        self._in_graph = InGraph(tf)
        optimizer.install(tf)
        inputs.install(tf)
        if self.seed_mode is not None:
            self._seeds = SeedControl(tf, self.seed, self.seed_mode).__enter__()
        elif self.seed is not None:
            tf.compat.v1.set_random_seed(self.seed)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.detach()
        failure = self._witness.failure if self._witness is not None else None
        if self._witness is not None:
            self._witness.close()
        if failure is not None and exc_type is None:  # the script went on after it: still a failure
            try:
                self._finish_meta()
            finally:
                self._writer.close()
            raise failure
        if self._seeds is not None:
            self._seeds.__exit__(None, None, None)
        optimizer.uninstall()
        inputs.uninstall()
        self._finish_meta()
        self._writer.close()
        if exc_type is None and self.steps == 0:
            raise RecordError(
                "%s: no training step was recorded. A step is a session run that updates trainable "
                "variables, through an optimizer (apply_gradients, minimize, an Apply* op) or by assign ops "
                "computed from gradients; check that the code trains inside the recorder, with a session it "
                "is attached to. A step the graph does not show (a gradient written out by hand) can be "
                "declared: tracekit record --train-op NAME --gradient VAR=TENSOR (tracekit.tf1.record("
                "train_op=..., gradients=...))" % self.path)

    def _recording_meta(self) -> Dict[str, Any]:
        frames = self._schedule.frames
        return RecordingMeta.made(every=frames.every, steps_limit=self.steps_limit, keyframes=frames.meta(),
                                  worker=self.worker).to_meta()

    def _finish_meta(self) -> None:
        seeds = {"seed": self.seed, "mode": None if self.seed_mode is None else self.seed_mode.value}
        if self._seeds is not None:
            seeds.update(self._seeds.describe())
        warnings: List[str] = []
        draws: Dict[str, Any] = {}
        if self._graph is not None:
            model = self._models.get(self._graph)
            if model is not None:
                seeds.update(model.seeds())
                draws = model.draw_uses()
                warnings = list(model.warnings)
        warnings.extend(self.declared.missing(self._graph))
        warnings.extend(self._schedule.warnings())
        witnessed = self._witness.meta()
        warnings.extend(raced(witnessed))
        meta = {"seeds": seeds, WARNINGS: warnings, DRAWS: draws, "recording": self._recording_meta()}
        meta.update(witnessed)
        self._writer.update_meta(meta)
        self.warnings = warnings
        for warning in warnings:
            LOG.warning("%s: %s", self.path, warning)

    @property
    def seed_control(self) -> Optional[SeedControl]:
        """With a seed_mode: the seed control (its `operation_seed` can be set, as the tool's)."""
        return self._seeds

    # ---- attaching (intercept.py wraps the session methods) ---------------------------------

    def session(self, sess: Any) -> Any:
        """Record the training steps `sess` runs (a Session, or a MonitoredSession and the
        raw session inside it); returns `sess` itself."""
        return self._patches.session(sess)

    def hook(self) -> Any:
        """A SessionRunHook for Estimator.train(hooks=[...]), MonitoredTrainingSession and the like."""
        return make_hook(self._tf, self)

    def attach_all(self) -> None:
        """Record the training steps of every session (the zero-code mode)."""
        self._patches.attach_all(self._tf.compat.v1.Session.__mro__[1])  # BaseSession

    def detach(self) -> None:
        self._patches.detach()

    # ---- what the session's wrapped methods ask (intercept.Steps) ------------------------------

    def busy(self) -> bool:
        """This thread is inside a step the recorder runs: its own runs pass through."""
        return bool(getattr(self._local, "busy", False))

    def plan_run(self, sess: Any, fetches: Any, feed_dict: Any) -> Optional[StepPlan]:
        """The step a session.run would be (None: not a training step, or not recorded)."""
        if self.done or self.busy():
            return None
        graph = sess.graph
        try:
            fetch_ops = [as_op(graph.as_graph_element(f, allow_tensor=True, allow_operation=True))
                         for f in flatten_fetches(fetches)]
            fed = [element_name(graph, key) for key in (feed_dict or {})]
        except (TypeError, ValueError, KeyError):
            return None  # not something this graph can run; the session will say so
        plan = self._model(graph).plan([op for op in fetch_ops if op is not None], [n for n in fed if n])
        if plan.micro:  # a micro-batch run of the coming step (accumulation.py)
            return plan if self._accepts(graph) else None
        if not plan.training:  # a run between steps that changes variables: seen, after the first step
            return plan if plan.changes and self.steps and graph is self._graph else None
        return plan if self._accepts(graph) else None

    def _model(self, graph: Any) -> GraphModel:
        with self._lock:
            model = self._models.get(graph)
            if model is None:
                model = self._models[graph] = GraphModel(graph, self._tf, self.declared, self.loss_parts)
            return model

    def _accepts(self, graph: Any) -> bool:
        """Steps are recorded from one graph: the first that trains; with `worker`, the first that
        places ops on that worker task (parameter-server training, a thread per worker)."""
        if self.worker is not None and not self._model(graph).on_worker(self.worker):
            return False
        with self._lock:
            if self._graph is None:
                self._graph = graph
            elif graph is not self._graph:
                self._model(self._graph)._warn("training steps of a second graph were not recorded")
                return False
        return True

    # ---- steps --------------------------------------------------------------------------------

    def full(self) -> bool:
        """Whether the coming step is recorded whole (a keyframe's values, its state read after)."""
        return self._schedule.fetch_all(self.steps)

    def fetches(self, plan: StepPlan, full: bool, callable_: bool = False) -> "collections.OrderedDict[str, Any]":
        """What a step of `plan` fetches to record (key -> tensor): all of it, or the light kinds;
        from session.run (not `callable_`), none of what it refuses to fetch."""
        refuted = self._witness.refuted  # scalars re-execution showed are no learning rate; those that are, added
        fetch = recorded(plan, full, callable_, refuted)
        fetch.update(self._witness.rates(plan))
        return fetch

    def record_run(self, sess: Any, run: Callable[..., Any], plan: StepPlan, fetches: Any, feed_dict: Any,
                   options: Any, run_metadata: Any) -> Any:
        """Run the step with what it records fetched alongside; the caller's fetches' values. A run
        between steps that changes variables (plan.training False) runs as it is, and the next
        step records their new values as what it started from."""
        if not plan.training and not plan.micro:
            user = run(sess, fetches, feed_dict, options, run_metadata)
            self._state.note_changed(plan.changes)
            return user
        def execute(extra: Any, probes: Any) -> Tuple[Any, List[Tuple[str, Any]], List[Any], List[Any]]:
            user, got, probed = run(sess, [fetches, dict(extra), [p for _, _, p in probes or ()]], feed_dict,
                                    options, run_metadata)
            feeds = [(element_name(sess.graph, key), value) for key, value in (feed_dict or {}).items()]
            return user, feeds, [got[key] for key in extra], probed
        if plan.micro:
            return self.micro_batch(sess, run, plan, execute)
        return self.step(sess, run, plan, execute)

    def micro_batch(self, sess: Any, run: Callable[..., Any], plan: StepPlan,
                    execute: Callable[[Any, Any], Tuple[Any, List[Tuple[str, Any]], List[Any], List[Any]]]) -> Any:
        """A micro-batch run: what it feeds, draws, computes and adds to the accumulators is kept for
        the step that applies them (the state is read first, where the recording starts here)."""
        with self._step_lock:
            self._local.busy = True
            try:
                self._begin(sess, run)
                probes = self._witness.probes(plan, lambda: self._state.by_name(sess, run))  # its loss checked once
                extra = self.fetches(plan, True)
                user, feeds, got, probed = execute(extra, probes)
                got = taken(extra, got) + unfetched(plan, True, self._model(sess.graph)._warn)
                values = self._witnessed(sess.graph, plan, feeds, got, [], probes, probed)
                feeds = [(name, self._as_consumed(sess.graph, name, value)) for name, value in feeds if name]
                self._micro.add(feeds, values, plan.changes)
                news = self._kinds.new_sources(plan)
                if news is not None:
                    self._writer.update_meta(news)
                self._state.note_changed(plan.changes)
            finally:
                self._local.busy = False
        return user

    def step(self, sess: Any, run: Callable[..., Any], plan: StepPlan,
              execute: Callable[[Any, Any], Tuple[Any, List[Tuple[str, Any]], List[Any], List[Any]]],
              callable_: bool = False) -> Any:
        """One training step, which execute(extra, probes) runs with the tensors a step records
        (`extra`: key -> tensor) and the self-check's probes fetched too, returning the caller's
        values, the feeds, `extra`'s values in order and the probes' (`callable_`: it runs a
        callable, not session.run). Its starting state is read first where it must be; what it
        records is checked (witness.py), then written."""
        with self._step_lock:
            self._local.busy = True
            try:
                self._begin(sess, run)
                changed = self._state.read_changed(sess, run)
                probes = self._witness.probes(plan, lambda: self._state.by_name(sess, run))
                extra = self.fetches(plan, self.full(), callable_)
                digests = self._digests_here(sess.graph, plan, callable_)
                extra, made = (extra, {}) if digests is None else digests.swap(extra)
                raced = counter_reads.fetches(sess.graph, plan, callable_, self._model(sess.graph)._warn)
                before = int(run(sess, plan.global_step)) if raced else None  # to place the reads
                extra.update(raced)
                user, feeds, got, probed = execute(extra, probes)
                got, reads = counter_reads.split(taken(extra, got))
                got = assembled(made, got) + ([] if callable_ else unfetched(plan, self.full(), self._model(sess.graph)._warn))
                values = self._witnessed(sess.graph, plan, feeds, got, changed, probes, probed)
                self._record(sess, run, plan, feeds, user, values, changed, (before, reads), digests)
            finally:
                self._local.busy = False
        self._maybe_stop()
        return user

    def record_callable(self, sess: Any, make: Callable[..., Any], options: Any) -> Any:
        """What TF1 Keras' callable of `options` becomes: its steps recorded as session.run's are."""
        graph = sess.graph
        if self.done:
            return make(sess, options)
        try:
            fetched = [graph.as_graph_element(name) for name in options.fetch]
            ops = [as_op(e) for e in fetched] + [graph.get_operation_by_name(n) for n in options.target]
        except (KeyError, ValueError):
            return make(sess, options)
        plan = self._model(graph).plan(ops, list(options.feed))
        if not plan.training or not self._accepts(graph):
            return make(sess, options)
        return KerasCallable(self, sess, make, options, plan).call

    def _digests_here(self, graph: Any, plan: StepPlan, callable_: bool) -> Optional[GraphDigests]:
        """Where the coming step's digests are made in the graph (graph_digests.py): a step between
        keyframes of session.run whose values the witness does not need (the schedule decides
        now); None where it is recorded from values."""
        schedule = self._schedule
        if callable_ or plan.micro or not schedule.frames.digests or schedule.planning or \
                self._witness.needs_values(plan) or schedule.exhausted(self.steps, self._written()) or \
                schedule.keyframe(self.steps, self._written()):
            return None
        return self._in_graph.of(graph, self._model(graph)._warn) if self._in_graph is not None else None

    def _begin(self, sess: Any, run: Callable[..., Any]) -> None:
        """Before the first step: the initial state and the environment."""
        if self._state.variables is not None:
            return
        model = self._model(sess.graph)
        self._state.begin(model.variables())
        read = self._state.read(sess, run)
        with self._writer.initial():
            for key, _, value in read:
                self._writer.add(*split_key(key), value=value, copy=False)
        self._witness.state(named(read))
        slots, updates = model.slot_roles(), model.update_facts(lambda tensors: run(sess, tensors))
        self._witness.begin({v.name: key for key, v, _ in read}, updates, slots)
        self._writer.update_meta({"tensorflow": tensorflow_environment(self._tf, sess), "slots": slots,
                                 "updates": updates})

    def _witnessed(self, graph: Any, plan: StepPlan, feeds: List[Tuple[str, Any]], values: List[Tuple[str, Any]],
                   changed: List[Tuple[str, Any]], probes: Any, probed: List[Any]) -> List[Tuple[str, Any]]:
        """The step's values, checked and their racy reads recomputed (witness.py); a failed check
        ends the recording."""
        witness = self._witness
        values = witness.after_run(self._model(graph), plan, self.steps, feeds, values, changed, probes, probed)
        if witness.failure is not None:
            self.done = True
            self._writer.update_meta(witness.meta())
            raise witness.failure
        return values

    def _record(self, sess: Any, run: Callable[..., Any], plan: StepPlan, feeds: List[Tuple[str, Any]],
                user: Any, extra: List[Tuple[str, Any]], changed: List[Tuple[str, Any]],
                raced: Tuple[Optional[int], Dict[str, List[Any]]] = (None, {}),
                digests: Optional[GraphDigests] = None) -> None:
        if self._schedule.exhausted(self.steps, self._written()):  # a budget without --steps is full
            self.done = True
            self._writer.update_meta({"recording": self._recording_meta()})
            return
        extra, term_values = terms.split(plan.terms, extra)  # the loss's parts go to the step's info
        feeds = [(name, self._as_consumed(sess.graph, name, value)) for name, value in feeds if name]
        micro, feeds, extra = self._micro.merged(plan, feeds, extra, self._model(sess.graph)._warn)
        # The state's digests made in the graph (the witness then keeps no state), or its values
        state = (digests.read(sess, run, self._state.variables or []) if digests is not None
                 else self._state.read(sess, run) if self.full() else None)
        after = None if state is None or digests is not None else named(state)
        extra = self._witness.audit(self._model(sess.graph), plan, self.steps, extra, after)
        self._witness.state(after)
        extra = extra if micro else self._drawn.kept(plan.fetch, extra)  # checked, made again: no values
        keyframe = self._keyframe(feeds, extra, state)
        if self.steps == 0:
            self._writer.update_meta({REGULARIZATION_LOSSES: [split_key(k)[1] for k in plan.regularization]})
        global_step = None
        if plan.global_step is not None:  # read after the step: its value in the same run is racy
            global_step = int(run(sess, plan.global_step))
        w = self._writer
        trained = "+".join(plan.train_ops)
        news = self._kinds.new(plan, held_with(plan, feeds, extra) if micro else None)
        if news is not None:  # a new kind of step
            w.update_meta(news)
            for message in self._parts.claim(trained, plan, term_values, extra):
                self._model(sess.graph)._warn(message)
            self._witness.note_losses(plan)
            w.update_meta(self._witness.meta())
        info = dict({"global_step": global_step, "train_ops": plan.train_ops}, **self._parts.info(trained, term_values))
        read = counter_reads.offsets(plan.races, raced[1], raced[0], global_step, self._model(sess.graph)._warn)
        if read:
            info[counter_reads.COUNTER_READS] = read
        if micro:
            info["micro_batches"] = micro
            if news is not None:
                w.update_meta({"accumulation": self._micro.meta(plan, micro, extra)})
        w.begin_step(info=info)
        try:
            for name, value in feeds:
                if name:  # copied: feed buffers get reused
                    w.add("input", name, value)
            for key, value in extra:
                self._add(key, value, keyframe)
            regularization = [value for key, value in extra if key in plan.regularization]
            if regularization:  # their sum: what a TF2 port's sum(model.losses) is compared with
                w.add("loss", "regularization", functools.reduce(np.add, regularization))
            w.add("fetch", "fetches", storable(user), copy=False)  # a structure: kept whole
            for key, _, value in state or []:
                self._add(key, value, keyframe)
            for key, value in changed:  # kept whole: what forcing loads into the port
                w.add(*split_key(key), value=value, copy=False)
        except BaseException:
            w.abort_step()
            raise
        w.end_step()
        self.steps += 1
        if self._progress is not None:
            self._progress(self.steps, self.steps_limit)

    def _as_consumed(self, graph: Any, name: str, value: Any) -> Any:
        """A fed value in the dtype the graph consumed it as; the fed dtype noted in the metadata."""
        value, fed = as_consumed(graph, name, value)
        news = self._kinds.fed(name, fed)
        if news is not None:
            self._writer.update_meta(news)
        return value

    def _add(self, key: str, value: Any, keyframe: bool) -> None:
        how = self._schedule.frames.how(key, keyframe)
        if how is not None:
            self._writer.add(*split_key(key), value=value, copy=False, digest=how == "digest")

    def _keyframe(self, feeds: List[Tuple[str, Any]], extra: List[Tuple[str, Any]], state: Any) -> bool:
        """Whether this step is kept whole (a budget is planned from the first step's values)."""
        if self._schedule.planning:
            values = dict(extra)
            values.update((make_key("input", name), value) for name, value in feeds if name)
            values.update((key, value) for key, _, value in state or [])
            self._writer.flush()  # the initial state's bytes, all counted
            self._schedule.measure(values, estimate_stored, self._written())
            self._writer.update_meta({"recording": self._recording_meta()})
        return self._schedule.keyframe(self.steps, self._written())

    def _written(self) -> int:
        return keyframes.written(self._writer)

    def _maybe_stop(self) -> None:
        if self.steps_limit is not None and self.steps >= self.steps_limit and not self.done:
            self.done = True
            if self.stop_script:
                raise StopRecording("recorded %d steps" % self.steps)

