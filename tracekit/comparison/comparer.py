"""The streaming comparison: a golden's steps against a replay's, fed one step at a time
(engine.compare_data feeds a written trace's steps, tracekit.tf2.check a replay's as the port
produces them). Each tensor is read and compared on worker threads a few tensors ahead;
steps are judged in order, in data-flow order within a step: statistics, failures that
amplified round-off explains (noise.py), and the first divergence."""

from __future__ import annotations

import collections
import functools
from typing import Any, Deque, Dict, List, Mapping, Optional, Set, Tuple, Type

import numpy as np

from ..keys import BEFORE, INITIAL_STEP, KIND_ORDER, REPLICA, STATE_KINDS, make_key, replica_base, split_key
from ..sources import paired
from ..store import Trace, provenance
from ..store.held import uncompared
from ..store.meta import ReplayMeta, replay_of
from . import dropout, sparse
from .diagnosis import diagnose, with_values
from .judging import Compared, judge_step
from .fingerprints import fittable, from_golden_state
from .proportion import PROPORTIONAL_ULPS, held_to_proportion
from .loss_terms import port_source_key, source_key
from .floor import under_the_floor
from .missing import missing_hint
from .digests import WHOLE, as_digest, compare_digests
from .envdiff import EnvironmentDiff, Profile
from .carried import carried
from .noise import Noise, NoiseTracker
from .pipeline import Pipeline
from .races import counter_notes
from .result import Comparison, Divergence, TensorResult
from .stats import Stats, compare_values, dtype_name
from .tolerance import Resolved

# Tensors larger than this (on average over the golden's steps) are read and compared on worker
# threads, at most PAIRS_AHEAD of them ahead of the one being judged (memory: a few pairs of values).
READ_AHEAD_BYTES = 64 << 10
PAIRS_AHEAD = 4
# ... and no more of them than this many golden bytes (a float64 replay's side is twice that, its
# statistics' temporaries more): BERT-base's word embeddings, their gradient and slots are 94 MB each.
BYTES_AHEAD = 256 << 20

# Kinds whose failing values the noise tracker looks at (an error budget, element by element).
NOISE_VALUES = frozenset(["var", "tap"])

# Steps whose loss values are kept to fit a slip in one part of the loss (comparison/loss_terms.py).
LOSSES_KEPT = 1000

# Kinds a replay does not reproduce by default: TF1 fetch structures have no TF2 counterpart.
NOT_REPLAYED = frozenset(["fetch"])


class Comparer:
    """A comparison fed one step at a time: `compare` feeds it a written trace's steps, a replay
    (tracekit.tf2.check) each step's values as the port produces them, so nothing is written.
    `step` queues a step's tensors and judges the steps before it; `drain` judges every step fed
    so far, `finish` makes the result. The feeder refreshes the golden (Trace.refresh) now and
    then, after a drain: then no read is in flight."""

    takes_initial = True  # as a replay's sink (replay/loop.py)

    def __init__(self, golden: Trace, actual: str, profile: Profile, diff: EnvironmentDiff, code: Optional[bool],
                 result_type: Type[Comparison] = Comparison, replay: Optional[ReplayMeta] = None,
                 diagnose: bool = True) -> None:
        self.golden = golden
        self.code = code
        # False: a measurement (an envelope's perturbed run against the unmoved one), whose
        # differences are the point; no cause is sought for them, nor are values kept to seek one
        self._diagnose = diagnose
        self._replay = replay  # what the replay said of itself when it started: which steps start from the golden
        self.result = result = result_type(golden.path, actual, profile, diff)
        result.golden_provenance = provenance.read(golden.meta, golden.created)
        self._by_key: Dict[str, TensorResult] = {}
        self._absent: Set[str] = set()  # golden keys a step of the replay lacked
        self._seen: Set[str] = set()  # keys the replay produced in some step
        self._noise = NoiseTracker(golden.names("grad"), golden.names("slot"))
        self._first: Optional[Divergence] = None  # the first failure no tolerance accepts and no round-off explains
        self._explained_first: Optional[Divergence] = None  # the first divergence if nothing unexplained fails
        self._values: Dict[Tuple[int, str], Tuple[Any, Any]] = {}  # (step, key) of a divergence -> its two values
        self._step_values: Dict[str, Tuple[Any, Any]] = {}  # the first divergence's step's failures, for fingerprints
        # key -> {step: (golden, port)} of each scalar loss at steps from the golden's state (loss_terms.py)
        # and of each learning rate at every step (races.py)
        self._scalars: Dict[str, Dict[int, Tuple[float, float]]] = {}
        # key -> its golden bytes at a step (on average over the golden's steps)
        self._bytes = {t.key: t.raw_bytes // max(1, t.steps + t.initial) for t in golden.catalog}
        self._big = {key for key, size in self._bytes.items() if size > READ_AHEAD_BYTES}
        self._work = Pipeline(ahead=PAIRS_AHEAD, budget=BYTES_AHEAD)
        self._queued: Deque[Tuple[int, List[str]]] = collections.deque()  # steps fed, not judged: (index, keys)
        self._forms: Dict[str, str] = {}  # key -> how a gradient sparse on some side is compared
        self._var_shapes = {t.name: t.shape for t in golden.catalog if t.kind == "var"}
        self._first_step: Optional[Mapping[str, Any]] = None  # the replay's step 0, until judged (carried.py)
        # step -> its sparse gradients' pairs and both steps, until the step is judged: the rows of
        # the first divergence's step are read once it is known (sparse.rows), no other step's
        self._sparse: Dict[int, Tuple[Any, Mapping[str, Any], Mapping[str, Any]]] = {}

    def initial(self, a_step: Mapping[str, Any], reasons: Optional[Mapping[str, str]] = None) -> None:
        """Compare the initial states, when the golden has one."""
        if self.golden.has_initial:
            self.step(INITIAL_STEP, a_step, reasons or {})

    def step(self, index: int, a_step: Mapping[str, Any], reasons: Mapping[str, str],
             fed: Optional[Mapping[str, Any]] = None) -> None:
        """Compare the golden's step `index` (INITIAL_STEP: the initial state) with `a_step`, the
        replay's values by key; `reasons`: the keys the replay does not produce -> why (those
        known so far: finish() takes the replay's final word); `fed`: golden values the replay
        read already (its inputs), taken as they are instead of read again. Returns once the
        steps before this one are judged: this one's tensors are read and compared meanwhile."""
        result, golden = self.result, self.golden
        g_step = golden.initial if index == INITIAL_STEP else golden.step(index)
        result.steps += index != INITIAL_STEP
        copies = _replica_copies(a_step)
        keys = []
        sparse_pairs = sparse.pairs(g_step.keys(), a_step.keys())
        if sparse_pairs:
            self._sparse[index] = (set(sparse_pairs.values()), g_step, a_step)
        # Where a side keeps digests (store/digest.py), those tensors are judged from digests.
        g_digests, a_digests = g_step.digests, getattr(a_step, "digests", {})
        for key in _in_order(list(g_step) + list(g_digests)) if g_digests else g_step:
            kind, name = split_key(key)
            pair = sparse_pairs.get(key)
            if kind in NOT_REPLAYED or key in reasons:
                result.not_compared.setdefault(key, reasons.get(key, "not replayed (%s)" % kind))
            elif name.endswith(BEFORE):  # a fact of the TF1 run between steps, not a result of the step
                result.not_compared.setdefault(key, "the value step %d started from, set by a run between steps "
                                                    "(teacher forcing loads it)" % index)
            elif pair is not None:  # one gradient, sparse on some side: compared once, in one form
                if pair.golden[0] == key:
                    self._seen.update(pair.golden)
                    parts = [(pair.key, False)]
                    if pair.form == sparse.BY_ROWS:  # the ids first: rows of other ids are other rows
                        parts.insert(0, (pair.key + sparse.INDICES, True))
                    for part, indices in parts:
                        self._forms[part] = sparse.INDEX_SET if indices else pair.form
                        keys.append(part)
                        self._work.put(functools.partial(self._pair_sparse, index, g_step, a_step, pair, indices),
                                       key in self._big, self._bytes.get(key, 0))
            elif key not in a_step and key not in a_digests:  # a step captured light (replay_steps' full_at)
                self._absent.add(key)
            elif key in g_digests or key not in a_step:
                self._seen.add(key)
                keys.append(key)
                # A digest of the replay's whole tensor is made: worth a worker thread unless it is small.
                whole = g_digests[key].whole if key in g_digests else a_digests[key].whole
                self._work.put(functools.partial(self._pair_digests, index, g_step, a_step, key), not whole)
            else:
                self._seen.add(key)
                keys.append(key)
                # One call per tensor: both sides read, then their statistics, on a worker thread.
                a_keys = [key] + copies.get(key, [])
                read = fed is None or key not in fed
                source = g_step if read else fed
                # A fed value is not read again: too little work left to hand to a worker thread.
                self._work.put(functools.partial(self._pair, index, source, a_step, key, a_keys),
                               read and key in self._big, self._bytes.get(key, 0))
        if index == 0:
            self._first_step = a_step
        self._queued.append((index, keys))
        while len(self._queued) > 1:
            self._judge_next()

    def drain(self) -> None:
        """Judge every step fed so far: then no read is in flight."""
        while self._queued:
            self._judge_next()

    def _judge_next(self) -> None:
        """Take the oldest queued step's results, in data-flow order, and judge it."""
        result = self.result
        index, keys = self._queued.popleft()
        compared: Compared = []
        # Once both first divergences are known, only the noise tracker needs a failing tensor's values;
        # a measurement keeps no others at all (a step of BERT-base failing whole is gigabytes of them).
        keep_all = self._diagnose and (self._first is None or (self._explained_first is None
                                                               and not result.tolerance.accept_noise))
        for key in keys:
            tol, g_value, outcomes = self._work.take()
            if tol.ignore:
                result.not_compared.setdefault(key, "ignored by a tolerance rule")
            keep = keep_all or split_key(key)[0] in NOISE_VALUES
            for a_key, a_value, stats in outcomes:
                tensor = self._by_key.get(a_key)
                if tensor is None:
                    tensor = self._by_key[a_key] = TensorResult(*split_key(a_key), form=self._forms.get(a_key, ""))
                    result.tensors.append(tensor)
                failed = None if stats.ok else (g_value, a_value, tol) if keep else (None, None, tol)
                compared.append((tensor, stats, failed))
        accepted = self._carried(index, compared)
        before = self._first, self._explained_first
        self._first, self._explained_first = judge_step(result, index, compared, self._noise, before, accepted)
        for found, was in zip((self._first, self._explained_first), before):
            if found is not None and found is not was:  # kept for the hints, which look at both values there
                self._values.update(((index, t.key), failed[:2]) for t, _, failed in compared
                                    if failed is not None and t.key == found.key)
        if self._diagnose and self._first is not None and self._first is not before[0] and index != INITIAL_STEP:
            # (no fingerprint is fitted on the initial state: the whole state is not held for one)
            self._step_values = fittable((t.key, t.kind, failed[0], failed[1]) for t, _, failed in compared
                                         if failed is not None)
        if self._first is None or self._first.step != index:
            self._sparse.pop(index, None)

    def _ignored(self, key: str) -> bool:
        """A tolerance rule leaves `key` out at every step compared."""
        kind, name = split_key(key)
        resolve = self.result.tolerance.resolve
        return all(resolve(kind, name, step, "float32").ignore for step in range(max(1, self.result.steps)))

    def _carried(self, index: int, compared: Compared) -> Dict[str, Noise]:
        """Step 0's failing variables and slots that their update carried past their tolerance
        (carried.py), from the golden's initial state, which the replay started from."""
        if index != 0 or self._first_step is None:
            return {}
        actual, self._first_step = self._first_step, None
        failing = [t.key for t, s, _ in compared if not s.ok and t.kind in ("var", "slot")]
        if not failing or not self.golden.has_initial:
            return {}
        passed = {t.key for t, s, _ in compared if s.ok}
        return carried(self.golden, index, failing, passed, actual, self.golden.state_view(0))

    def _pair(self, index: int, g_step: Mapping[str, Any], a_step: Mapping[str, Any], key: str,
              a_keys: List[str]) -> Tuple[Resolved, Any, List[Tuple[str, Any, Stats]]]:
        """(tolerance, golden value, (key, value, stats) of each of the replay's values) of one
        tensor: a mirrored variable's replicas must agree, so a copy that went apart is compared too."""
        kind, name = split_key(key)
        g_value = g_step[key]
        tol = self.result.tolerance.resolve(kind, name, index, dtype_name(g_value))
        if tol.ignore:
            return tol, g_value, []
        outcomes = []
        for a_key in a_keys:
            a_value = a_step[a_key]
            if kind == "random":  # a draw is its numbers in order: a port may draw them in another layout
                a_value = _as_drawn(a_value, g_value)
            stats = compare_values(g_value, a_value, tol)
            if kind == "loss" and from_golden_state(self._replay, index) or kind == "lr":
                self._keep_scalar(key, index, g_value, a_value)
            if kind == "var":
                self._proportion(index, key, stats, g_value, a_value, tol)
            outcomes.append((a_key, a_value, stats))
        return tol, g_value, outcomes

    def _pair_digests(self, index: int, g_step: Any, a_step: Mapping[str, Any],
                      key: str) -> Tuple[Resolved, Any, List[Tuple[str, Any, Stats]]]:
        """`_pair` where a side keeps a digest: the other side's digest is made, both are compared
        (comparison/digests.py). The values returned are the digests, or the arrays where a
        digest holds every element."""
        kind, name = split_key(key)
        g = g_step.digests[key] if key in g_step.digests else g_step[key]
        a_digests = getattr(a_step, "digests", {})
        a = a_digests[key] if key in a_digests else a_step[key]
        g_digest = as_digest(g)
        a_digest = as_digest(a, g_digest)
        tol = self.result.tolerance.resolve(kind, name, index, g_digest.dtype if g_digest is not None else
                                            dtype_name(g))
        if tol.ignore:
            return tol, g, []
        if g_digest is None or a_digest is None:  # a structure or strings against a digest
            return tol, g, [(key, a, compare_values(g, a, tol))]
        stats = compare_digests(g_digest, a_digest, tol)
        if stats.basis == WHOLE:
            return tol, g_digest.value(), [(key, a_digest.value(), stats)]
        if kind == "var":
            self._proportion(index, key, stats, g_digest, a_digest, tol)
        return tol, g_digest, [(key, a_digest, stats)]

    def _proportion(self, index: int, key: str, stats: Stats, g_value: Any, a_value: Any, tol: Resolved) -> None:
        """held_to_proportion, where the step started from the golden's state; on a digest's
        sampled elements, the state cut to them (comparison/sampled.py)."""
        if not stats.ok or stats.discrete or stats.ulps < PROPORTIONAL_ULPS or \
                not from_golden_state(self._replay, index):
            return
        before = self.golden.before(index)  # the state the step started from
        if before is None or key not in before:
            return
        held_to_proportion(stats, g_value, a_value, before[key], tol)

    def _pair_sparse(self, index: int, g_step: Mapping[str, Any], a_step: Mapping[str, Any],
                     pair: sparse.SparsePair, indices: bool) -> Tuple[Resolved, Any, List[Tuple[str, Any, Stats]]]:
        """`_pair` of a gradient one side holds as rows and indices, in the pair's form (`indices`:
        the distinct indices of one both sides hold so, compared exactly)."""
        name = split_key(pair.key)[1]
        key = pair.key + sparse.INDICES if indices else pair.key
        tol = self.result.tolerance.resolve("grad", split_key(key)[1], index,
                                            dtype_name(g_step[pair.golden[1 if indices else 0]]))
        if tol.ignore:
            return tol, None, []
        g_value, a_value = sparse.values(pair, g_step, a_step, self._var_shapes.get(name), indices)
        return tol, g_value, [(key, a_value, compare_values(g_value, a_value, tol))]

    def _keep_scalar(self, key: str, index: int, g_value: Any, a_value: Any) -> None:
        """A scalar loss's or learning rate's two values at a step (run on worker threads: each step is an
        entry of its own; past LOSSES_KEPT steps they are not kept, and a slip first seen there is not fitted,
        a race there not excused)."""
        g, a = np.asarray(g_value), np.asarray(a_value)
        kept = self._scalars.setdefault(key, {})
        if g.size == 1 == a.size and g.dtype.kind == "f" and a.dtype.kind == "f" and len(kept) < LOSSES_KEPT:
            kept[index] = float(g.reshape(())), float(a.reshape(()))

    @property
    def diverged(self) -> bool:
        """A failure no tolerance accepts and no round-off explains has been seen."""
        return self._first is not None

    def finish(self, actual_meta: Mapping[str, Any], actual_steps: int) -> Comparison:
        """The result, once every step is fed; `actual_meta` is the replay's metadata,
        `actual_steps` how many steps it ran."""
        try:
            self.drain()
        finally:
            self.close()
        result, golden = self.result, self.golden
        result.golden_steps, result.actual_steps = len(golden), actual_steps
        replay = replay_of(actual_meta) or ReplayMeta()
        result.forcing = str(replay.forcing or "none")
        result.forced = replay.forced
        result.loaded = replay.loaded
        if actual_steps < len(golden) and not replay.limited:
            # Not asked for (replay(steps=N) says so): the replay stopped early, or is not one.
            result.short = "the golden has %d steps, the replay only %d" % (len(golden), actual_steps)
        elif len(golden) != actual_steps:
            result.notes.append("the golden has %d steps, the replay %d: %d compared"
                                % (len(golden), actual_steps, result.steps))
        misused = dropout.rates(golden.meta, replay.draw_rates)
        for tensor in result.tensors:
            if tensor.key in misused:
                tensor.misused = "fed, but the port's dropout used it at rate %.4g where TF1's used %.4g" % (
                    misused[tensor.key]["actual"], misused[tensor.key]["golden"])
        for name, (recorded, port) in sorted(replay.reshaped_draws.items()):
            result.notes.append("random draw %s fed reshaped: the golden drew %s, the port asks for %s (as many "
                                "numbers, the same distribution)" % (name, tuple(recorded), tuple(port)))
        result.notes += counter_notes(replay.counter_reads) + list(replay.notes)
        for tensor in result.tensors:
            tensor.driven_by_noise = bool(tensor.noise) or self._noise.driven(tensor.kind, tensor.name)
        first = self._first or self._explained_first
        result.notes += under_the_floor(result.tensors, None if first is None else first.step)
        # A tensor may be absent from some steps (slots before the first update): missing means never.
        reasons = replay.not_replayed
        for key in sorted(self._absent - self._seen):
            if key in reasons:  # learnt after the step that lacked it
                result.not_compared.setdefault(key, reasons[key])
            elif self._ignored(key):
                result.not_compared.setdefault(key, "ignored by a tolerance rule (missing from the replay)")
            else:
                result.missing.append(key)
                result.missing_hints[key] = missing_hint(golden.meta, key)
        if result.steps and not any(t.kind in ("input", "loss") and t.steps for t in result.tensors):
            result.uncompared = uncompared(golden.meta)
        first = self._first or self._explained_first  # an unexplained failure, however late, is the news
        values = None if first is None else self._values[first.step, first.key]
        if values is not None and values[0] is None:  # a measurement's: not kept
            values = None
        result.first_divergence = first if values is None else with_values(first, *values)
        if self._diagnose:
            diagnose(result, golden, values, actual_meta, self.code, self._step_values if first is self._first else {},
                     self._scalars.get(first.key, {}) if first is not None else {},
                     sparse.rows(*self._sparse[first.step]) if first is not None and first.step in self._sparse
                     else {})
        result.rates = {key: dict(values) for key, values in self._scalars.items() if key.startswith("lr/")}
        if first is not None:
            shown = {first.key: first.key}
            shown.update((source_key(h), port_source_key(h)) for h in result.fingerprints if source_key(h) is not None)
            result.sources = paired(golden.meta, actual_meta, shown)
        return result

    def close(self) -> None:
        self._work.close()

    def __enter__(self) -> "Comparer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _in_order(keys: List[str]) -> List[str]:
    """Keys in data-flow order (a step's tensors are, its digests follow them), stable within a kind."""
    return sorted(keys, key=lambda key: KIND_ORDER[split_key(key)[0]])


def _replica_copies(step: Any) -> Dict[str, List[str]]:
    """The state keys of a replay under a strategy whose replicas disagreed -> the keys of the
    copies that differ ("var/w:0" -> ["var/w:0@replica1"]); the replayer writes only those."""
    out: Dict[str, List[str]] = {}
    for key in step:
        if REPLICA in key:
            kind, name = split_key(key)
            if kind in STATE_KINDS:
                out.setdefault(make_key(kind, replica_base(name)), []).append(key)
    return out


def _as_drawn(value: Any, golden: Any) -> Any:
    """A random draw of the golden's element count in the golden's shape (the tape fed it so)."""
    shape = getattr(golden, "shape", None)
    if isinstance(value, np.ndarray) and shape is not None and value.shape != shape and value.size == golden.size:
        return value.reshape(shape)
    return value
