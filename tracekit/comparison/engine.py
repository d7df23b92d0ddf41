"""Comparing a replayed trace with its golden: per tensor and step statistics, and the
first divergence in data-flow order (step, then inputs, random draws, taps in recorded
order, loss, learning rate, gradients, updated variables and slots)."""

from __future__ import annotations

import collections
import functools
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Type

import numpy as np

from ..store import Trace, open_trace, provenance
from ..store.provenance import Provenance
from ..keys import INITIAL_STEP, KIND_ORDER, REPLICA, STATE_KINDS, make_key, replica_base, split_key, step_label
from ..store.digest import Digest
from .arbiter import Arbitrated
from .asdict import comparison_dict
from .conventions import ConventionHint, convention_hints
from .digests import BITS, DIGEST, WHOLE, as_digest, compare_digests
from .distribution import DistributionHint, distribution_hints, layout
from .envdiff import Change, EnvironmentDiff, Profile, default_profile, environment_diff
from .noise import Noise, NoiseTracker
from .pipeline import Pipeline
from .select import Selection
from .series import StatsSeries
from . import sparse
from .slips import SlipHint, slip_hints
from .stats import Stats, badness, compare_values, dtype_name
from .tolerance import ROUNDOFF_ULPS, Resolved, Tolerance

# A step's (tensor, stats, and for a failing one: golden, actual, tolerance), in data-flow order.
Compared = List[Tuple["TensorResult", Stats, Optional[Tuple[Any, Any, Resolved]]]]

# Tensors larger than this (on average over the golden's steps) are read and compared on worker
# threads, at most PAIRS_AHEAD of them ahead of the one being judged (memory: a few pairs of values).
READ_AHEAD_BYTES = 64 << 10
PAIRS_AHEAD = 4

# Kinds whose failing values the noise tracker looks at (an error budget, element by element).
NOISE_VALUES = frozenset(["var", "tap"])

# Elements of the first divergence's two values a result keeps (a sample of larger ones).
VALUE_SAMPLE = 100_000

# Steps between Trace.refresh calls: memory stays flat however many steps are compared.
REFRESH_STEPS = 16

# Kinds a replay does not reproduce by default: TF1 fetch structures have no TF2 counterpart.
NOT_REPLAYED = frozenset(["fetch"])


@dataclass(eq=False)
class TensorResult:
    """One tensor over all compared steps. A step that fails the tolerance counts in
    `failed_steps`, unless amplified round-off explains it and the tolerance accepts that
    (`accepted_steps`); `noise` holds the explanation of every explained failing step."""

    kind: str
    name: str
    steps: int = 0
    failed_steps: int = 0
    first_failed: Optional[int] = None
    worst: Optional[Stats] = None
    worst_step: Optional[int] = None
    by_step: StatsSeries = field(default_factory=StatsSeries)  # step -> Stats, in step order
    noise: Dict[int, Noise] = field(default_factory=dict)
    accepted_steps: int = 0
    driven_by_noise: bool = False  # round-off alone moved it (noise.NoiseTracker.driven), or it follows
    form: str = ""  # how it was compared where the sides hold it in other forms (sparse.py), else ""
    digest_steps: int = 0  # steps judged from digests (a sample and statistics, or equal bytes), not values

    @property
    def key(self) -> str:
        return make_key(self.kind, self.name)

    @property
    def ok(self) -> bool:
        return self.failed_steps == 0

    @property
    def noise_floor(self) -> bool:
        """Some failing step is explained noise."""
        return bool(self.noise)

    def __repr__(self) -> str:
        worst = "" if self.worst is None else ", worst at %s: max abs %.3g, %.3g ulps" % (
            step_label(self.worst_step if self.worst_step is not None else 0), self.worst.max_abs, self.worst.ulps)
        first = "" if self.first_failed is None else ", first at %s" % step_label(self.first_failed)
        return "<TensorResult %s: %s, %d of %d steps failed%s%s>" % (
            self.key, "ok" if self.ok else "FAIL", self.failed_steps, self.steps, first, worst)

    def add(self, step: int, stats: Stats, noise: Optional[Noise] = None, accept: bool = False) -> None:
        self.by_step.append(step, stats)
        self.steps += 1
        self.digest_steps += stats.basis in (DIGEST, BITS)
        if noise is not None:
            self.noise[step] = noise
        if not stats.ok and noise is not None and accept:
            self.accepted_steps += 1
        elif not stats.ok:
            self.failed_steps += 1
            if self.first_failed is None:
                self.first_failed = step
        if self.worst is None or badness(stats) > badness(self.worst):
            self.worst, self.worst_step = stats, step


@dataclass(frozen=True)
class Divergence:
    """Where the replay first departs from the golden."""

    step: int  # -1: the initial state
    kind: str
    name: str
    stats: Stats
    noise: Optional[Noise] = None  # amplified round-off explains it (not accepted, or it would not be here)
    # The elements of the two values at the worst index, and the values themselves (for plots of
    # error against magnitude): whole up to VALUE_SAMPLE elements, else every k-th element of each.
    golden_at_worst: Any = None
    actual_at_worst: Any = None
    golden_value: Any = field(default=None, compare=False, repr=False)
    actual_value: Any = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> str:
        return make_key(self.kind, self.name)

    @property
    def noise_floor(self) -> bool:
        return self.noise is not None

    def __repr__(self) -> str:
        return "Divergence(step=%d, %s)" % (self.step, self.key)


def _sample(value: Any) -> Any:
    """A numeric array cut to at most VALUE_SAMPLE elements (every k-th, flattened), so a result
    does not keep a large tensor alive; anything else as it is."""
    array = np.asarray(value) if isinstance(value, np.ndarray) else None
    if array is None or array.size <= VALUE_SAMPLE:
        return value
    return array.reshape(-1)[::array.size // VALUE_SAMPLE + 1].copy()


def _element(value: Any, index: Optional[Tuple[int, ...]]) -> Any:
    """value[index] as a Python number, or None where there is no such element."""
    if value is None or index is None:
        return None
    try:
        return np.asarray(value)[tuple(index)].item()
    except (IndexError, TypeError, ValueError):
        return None


@dataclass(frozen=True)
class KindErrors:
    """The largest errors of one kind over every compared tensor and step."""

    kind: str
    tensors: int
    max_abs: float
    max_rel: float  # finite values only
    max_ulps: float  # in eps * the tensor's scale; finite values only


@dataclass(frozen=True)
class RoundoffCause:
    """A mismatch that machine round-off explains: every failing tensor is within the
    cross-machine bound of its kind, and the two runs differ in what selects kernels."""

    key: str  # the failing tensor closest to its bound
    ulps: float  # its error, in eps * its scale
    bound: float  # the bound of its kind (ROUNDOFF_ULPS)
    changes: Tuple[Change, ...]  # the kernel-selecting differences
    port: bool  # other code or another framework: a port's own error can hide in the same range
    # The same code for certain (both traces name their program, and it is the same) and a
    # machine difference that is recorded, not just unknown: "likely", else only "possible".
    likely: bool


@dataclass(eq=False)
class Comparison:
    """The result of `compare`: truthy when everything compared is within tolerance.
    `environment_diff` says what differs between the two runs' environments, `profile` which
    tolerance was used and why, `likely_cause` whether machine round-off explains a mismatch."""

    golden: str
    actual: str
    profile: Profile
    environment_diff: EnvironmentDiff
    tolerance: Tolerance = field(init=False)  # the profile's
    likely_cause: Optional[RoundoffCause] = None
    conventions: List[ConventionHint] = field(default_factory=list)  # known TF1/Keras differences it looks like
    slips: List[SlipHint] = field(default_factory=list)  # usual migration slips the first divergence fits
    # A replay under a tf.distribute strategy: where it ran (replicas, devices, reduction, input
    # split), and the distribution slips the first divergence looks like.
    distribution: Optional[Dict[str, Any]] = None
    distribution_hints: List[DistributionHint] = field(default_factory=list)
    # Tensors whose failures amplified round-off explains (comparison/noise.py): the first such
    # step of each, in order; accepted (not failures) when the tolerance says accept_noise.
    noise: List[Noise] = field(default_factory=list)
    steps: int = 0  # steps compared
    golden_steps: int = 0
    actual_steps: int = 0
    tensors: List[TensorResult] = field(default_factory=list)  # data-flow order
    first_divergence: Optional[Divergence] = None
    missing: List[str] = field(default_factory=list)  # golden tensors the replay did not produce
    not_compared: Dict[str, str] = field(default_factory=dict)  # key -> why
    notes: List[str] = field(default_factory=list)
    short: Optional[str] = None  # why the replay has fewer steps than it should
    # "state": a teacher-forced replay (each step from the golden's state): its errors are local.
    forcing: str = "none"
    # Where the golden's data came from: a derived golden (a TF2 run's data) is flagged in reports.
    golden_provenance: Optional[Provenance] = None
    # "local": a long golden judged by each step's own error (teacher-forced), failing steps judged
    # by the float64 arbiter (`arbitration`), and the port's drift from its own state judged
    # against the spread of perturbed replays (`drift`, None where not measured); "plain": the
    # replay compared as it ran (tf2/verdict.py).
    judged: str = "plain"
    arbitration: Optional[Arbitrated] = None
    drift: Optional["Comparison"] = None

    def __post_init__(self) -> None:
        self.tolerance = self.profile.tolerance

    @property
    def ok(self) -> bool:
        return self.first_divergence is None and not self.missing and self.short is None and \
            (self.drift is None or self.drift.ok)

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        where = "" if self.first_divergence is None else ", first divergence at %s, %s" % (
            step_label(self.first_divergence.step), self.first_divergence.key)
        return "<%s %s: %s vs golden %s, %d steps, %d tensors, tolerance %s%s>" % (
            type(self).__name__, "MATCH" if self.ok else "MISMATCH", self.actual, self.golden, self.steps,
            len(self.tensors), self.profile.name, where)

    def to_dict(self, by_step: bool = True, selection: "Optional[Selection]" = None) -> Dict[str, Any]:
        """The comparison as plain, JSON-serializable data (comparison/asdict.py: the schema,
        and how inf and nan are written); `by_step`: every tensor's statistics at each step
        too; `selection`: only the tensors and steps it shows."""
        return comparison_dict(self, by_step, selection)

    def tensor(self, kind: str, name: str) -> TensorResult:
        for result in self.tensors:
            if result.kind == kind and result.name == name:
                return result
        raise KeyError(make_key(kind, name))

    def max_errors(self) -> List[KindErrors]:
        """Largest error per kind, in data-flow order, over every step; with accept_noise,
        not counting tensors round-off drives (their errors are relative to noise)."""
        by_kind: Dict[str, List[float]] = {}
        for t in self.tensors:
            row = by_kind.setdefault(t.kind, [0, 0.0, 0.0, 0.0])
            row[0] += 1
            if t.driven_by_noise and self.tolerance.accept_noise:
                continue
            for stats in t.by_step.values():
                row[1] = max(row[1], stats.max_abs)
                if stats.max_rel != float("inf"):
                    row[2] = max(row[2], stats.max_rel)
                if stats.ulps != float("inf"):
                    row[3] = max(row[3], stats.ulps)
        return [KindErrors(kind, int(n), a, r, u) for kind, (n, a, r, u) in by_kind.items()]



def compare(golden: "str | Trace", actual: "str | Trace", tolerance: "Tolerance | str | None" = None,
            result_type: Type[Comparison] = Comparison,
            progress: Optional[Callable[[int, int], None]] = None) -> Comparison:
    """Compare a replayed trace (or any trace) with the golden, tensor by tensor, step by step.
    The result is data; `tracekit.compare` returns a `result_type` that can also render
    itself (report/comparison.py).

    Without a tolerance, what the traces are chooses one (envdiff.default_profile): the
    default Tolerance() for other code (a port replayed against its golden) or another
    TensorFlow; for the same code on the same TensorFlow, bit for bit when nothing that
    selects kernels differs, else the cross-machine round-off bound. `tolerance` may also
    name a profile: "exact", "round-off" or "default". progress(steps compared, steps to
    compare) is called after each step."""
    own = []  # traces opened here are closed here
    if not isinstance(golden, Trace):
        golden = open_trace(golden)
        own.append(golden)
    if not isinstance(actual, Trace):
        actual = open_trace(actual)
        own.append(actual)
    try:
        return _compare(golden, actual, comparer(golden, actual.path, actual.meta, tolerance, result_type), progress)
    finally:
        for trace in own:
            trace.close()


def same_code(golden_meta: Mapping[str, Any], actual_meta: Mapping[str, Any]) -> Optional[bool]:
    """Whether the same program computed both traces: their meta["program"] (entry point and
    source hash) agree. Without it (traces from an older tracekit), a replay compared with a
    recording is a port (False) and two recordings or two replays may be the same code (None)."""
    g, a = golden_meta.get("program"), actual_meta.get("program")
    if isinstance(g, dict) and isinstance(a, dict) and g.get("sha256") and a.get("sha256"):
        return g.get("entry") == a.get("entry") and g.get("sha256") == a.get("sha256")
    if ("replay" in golden_meta) != ("replay" in actual_meta):
        return False
    return None


def comparer(golden: Trace, actual: str, actual_meta: Mapping[str, Any], tolerance: "Tolerance | str | None" = None,
             result_type: Type[Comparison] = Comparison) -> "Comparer":
    """A Comparer of `golden` with the replay `actual` (a path, or what names a replay not
    written), whose metadata (environment, program) is `actual_meta`; the tolerance as for compare."""
    diff = environment_diff(golden.meta, actual_meta)
    code = same_code(golden.meta, actual_meta)
    return Comparer(golden, actual, default_profile(diff, code is False, tolerance), diff, code, result_type)


def _compare(golden: Trace, actual: Trace, comparer: "Comparer",
             progress: Optional[Callable[[int, int], None]] = None) -> Comparison:
    reasons = actual.meta.get("replay", {}).get("not_replayed", {})  # key -> why, from the replayer
    count = min(len(golden), len(actual))
    with comparer:
        if golden.has_initial and actual.has_initial:
            comparer.initial(actual.initial, reasons)
        for index in range(count):
            comparer.step(index, actual.step(index), reasons)
            if progress is not None:
                progress(index + 1, count)
            if (index + 1) % REFRESH_STEPS == 0:
                comparer.drain()  # no read in flight
                golden.refresh()
                actual.refresh()
        return comparer.finish(actual.meta, len(actual))


class Comparer:
    """A comparison fed one step at a time: `compare` feeds it a written trace's steps, a replay
    (tracekit.tf2.check) each step's values as the port produces them, so nothing is written.
    `step` queues a step's tensors and judges the steps before it; `drain` judges every step fed
    so far, `finish` makes the result. The feeder refreshes the golden (Trace.refresh) now and
    then, after a drain: then no read is in flight."""

    def __init__(self, golden: Trace, actual: str, profile: Profile, diff: EnvironmentDiff, code: Optional[bool],
                 result_type: Type[Comparison] = Comparison) -> None:
        self.golden = golden
        self.code = code
        self.result = result = result_type(golden.path, actual, profile, diff)
        result.golden_provenance = provenance.read(golden.meta, golden.created)
        self._by_key: Dict[str, TensorResult] = {}
        self._absent: Set[str] = set()  # golden keys a step of the replay lacked
        self._seen: Set[str] = set()  # keys the replay produced in some step
        self._noise = NoiseTracker(golden.names("grad"), golden.names("slot"))
        self._explained_first: Optional[Divergence] = None  # the first divergence if nothing unexplained fails
        self._values: Dict[Tuple[int, str], Tuple[Any, Any]] = {}  # (step, key) of a divergence -> its two values
        self._big = {t.key for t in golden.catalog if t.raw_bytes > READ_AHEAD_BYTES * max(1, t.steps + t.initial)}
        self._work = Pipeline(ahead=PAIRS_AHEAD)
        self._queued: Deque[Tuple[int, List[str]]] = collections.deque()  # steps fed, not judged: (index, keys)
        self._forms: Dict[str, str] = {}  # key -> how a gradient sparse on some side is compared
        self._var_shapes = {t.name: t.shape for t in golden.catalog if t.kind == "var"}

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
        # Where a side keeps digests (store/digest.py), those tensors are judged from digests.
        g_digests, a_digests = g_step.digests, getattr(a_step, "digests", {})
        for key in _in_order(list(g_step) + list(g_digests)) if g_digests else g_step:
            kind, name = split_key(key)
            pair = sparse_pairs.get(key)
            if kind in NOT_REPLAYED or key in reasons:
                result.not_compared.setdefault(key, reasons.get(key, "not replayed (%s)" % kind))
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
                                       key in self._big)
            elif key in g_digests or (key not in a_step and key in a_digests):
                self._seen.add(key)
                keys.append(key)
                # A digest of the replay's whole tensor is made: worth a worker thread unless it is small.
                whole = g_digests[key].whole if key in g_digests else a_digests[key].whole
                self._work.put(functools.partial(self._pair_digests, index, g_step, a_step, key), not whole)
            elif key not in a_step:
                self._absent.add(key)
            else:
                self._seen.add(key)
                keys.append(key)
                # One call per tensor: both sides read, then their statistics, on a worker thread.
                a_keys = [key] + copies.get(key, [])
                read = fed is None or key not in fed
                source = g_step if read else fed
                # A fed value is not read again: too little work left to hand to a worker thread.
                self._work.put(functools.partial(self._pair, index, source, a_step, key, a_keys),
                               read and key in self._big)
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
        # Once both first divergences are known, only the noise tracker needs a failing tensor's values.
        keep_all = result.first_divergence is None or (self._explained_first is None
                                                       and not result.tolerance.accept_noise)
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
        before = result.first_divergence, self._explained_first
        self._explained_first = _judge(result, index, compared, self._noise, self._explained_first)
        for found, was in zip((result.first_divergence, self._explained_first), before):
            if found is not None and found is not was:  # kept for the hints, which look at both values there
                self._values.update(((index, t.key), failed[:2]) for t, _, failed in compared
                                    if failed is not None and t.key == found.key)

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
            outcomes.append((a_key, a_value, compare_values(g_value, a_value, tol)))
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
        return tol, g_digest, [(key, a_digest, stats)]

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

    @property
    def diverged(self) -> bool:
        """A failure no tolerance accepts and no round-off explains has been seen."""
        return self.result.first_divergence is not None

    def finish(self, actual_meta: Mapping[str, Any], actual_steps: int) -> Comparison:
        """The result, once every step is fed; `actual_meta` is the replay's metadata,
        `actual_steps` how many steps it ran."""
        try:
            self.drain()
        finally:
            self.close()
        result, golden = self.result, self.golden
        result.golden_steps, result.actual_steps = len(golden), actual_steps
        replay = actual_meta.get("replay", {})
        result.forcing = str(replay.get("forcing") or "none")
        if actual_steps < len(golden) and not replay.get("limited"):
            # Not asked for (replay(steps=N) says so): the replay stopped early, or is not one.
            result.short = "the golden has %d steps, the replay only %d" % (len(golden), actual_steps)
        elif len(golden) != actual_steps:
            result.notes.append("the golden has %d steps, the replay %d: %d compared"
                                % (len(golden), actual_steps, result.steps))
        if result.first_divergence is None:  # an unexplained failure, however late, is the news
            result.first_divergence = self._explained_first
        for tensor in result.tensors:
            tensor.driven_by_noise = bool(tensor.noise) or self._noise.driven(tensor.kind, tensor.name)
        # A tensor may be absent from some steps (slots before the first update): missing means never.
        reasons = replay.get("not_replayed", {})
        for key in sorted(self._absent - self._seen):
            if key in reasons:  # learnt after the step that lacked it
                result.not_compared.setdefault(key, reasons[key])
            else:
                result.missing.append(key)
        result.likely_cause = _roundoff_cause(result, self.code)
        result.distribution = layout(actual_meta)
        first = result.first_divergence
        if first is not None and isinstance(self._values[first.step, first.key][0], Digest):
            g_digest, a_digest = self._values[first.step, first.key]
            index = first.stats.worst_index
            result.first_divergence = replace(
                first, golden_at_worst=g_digest.at(index), actual_at_worst=a_digest.at(index),
                golden_value=g_digest.sample, actual_value=a_digest.sample)
        elif first is not None:
            g_value, a_value = self._values[first.step, first.key]
            index = first.stats.worst_index
            result.first_divergence = first = replace(
                first, golden_at_worst=_element(g_value, index), actual_at_worst=_element(a_value, index),
                golden_value=_sample(g_value), actual_value=_sample(a_value))
            result.conventions = convention_hints(golden, first.step, first.kind, first.key,
                                                  lambda kinds: _agreed(result, first.step, kinds), g_value, a_value)
            result.slips = slip_hints(golden, first.step, first.key, g_value, a_value,
                                      lambda kinds: _agreed(result, first.step, kinds), actual_meta)
            result.distribution_hints = distribution_hints(golden, result.distribution, first.step, first.kind,
                                                           first.key, g_value, a_value)
        return result

    def close(self) -> None:
        self._work.close()

    def __enter__(self) -> "Comparer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _judge(result: Comparison, index: int, compared: "Compared", noise: NoiseTracker,
           explained_first: Optional[Divergence]) -> Optional[Divergence]:
    """Record a step's statistics, in data-flow order: which failures amplified round-off explains
    and the first divergence; returns the first divergence that only explained failures make."""
    tolerance = result.tolerance
    noise.gradients([(t.name, s) for t, s, _ in compared if t.kind == "grad"],
                    [s for t, s, _ in compared if t.kind == "loss"])
    for tensor, stats, failed in compared:
        # Integers and booleans (ids, indices, masks) never differ by round-off: never noise. From
        # a digest only the statistics are known: the noise tracker gets no values.
        if failed is not None and isinstance(failed[0], Digest):
            failed = (None, None, failed[2])
        explained = None if failed is None or stats.discrete else noise.explain(index, tensor.kind, tensor.name,
                                                                                 *failed)
        tensor.add(index, stats, explained, tolerance.accept_noise)
        if failed is None:
            continue
        if explained is not None:
            if len(tensor.noise) == 1:
                result.noise.append(explained)
            if explained_first is None and not tolerance.accept_noise:
                explained_first = Divergence(index, tensor.kind, tensor.name, stats, explained)
        elif result.first_divergence is None:
            result.first_divergence = Divergence(index, tensor.kind, tensor.name, stats)
    noise.end_step()
    return explained_first


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


def _agreed(result: Comparison, step: int, kinds: Sequence[str]) -> bool:
    """Every tensor of these kinds compared at `step` agreed, gradients among them."""
    compared = [t.by_step[step] for t in result.tensors if t.kind in kinds and step in t.by_step]
    grads = [t for t in result.tensors if t.kind == "grad" and step in t.by_step]
    return bool(grads) and all(stats.ok for stats in compared)


def _roundoff_cause(result: Comparison, code: Optional[bool]) -> Optional[RoundoffCause]:
    """Round-off explains the mismatch when the machines differ in what selects kernels and
    every failing tensor is within the cross-machine bound of its kind at every step."""
    changes = result.environment_diff.machine_changes
    if result.ok or not changes or result.missing or result.short is not None:
        return None
    closest: Optional[Tuple[float, str, float, float]] = None
    for tensor in result.tensors:
        bound = ROUNDOFF_ULPS.get(tensor.kind, 0.0)
        for step, stats in tensor.by_step.items():
            if stats.ok or (step in tensor.noise and result.tolerance.accept_noise):
                continue
            if stats.problem or stats.nonfinite or stats.ulps > bound:
                return None
            if closest is None or stats.ulps / bound > closest[0]:
                closest = (stats.ulps / bound, tensor.key, stats.ulps, bound)
    if closest is None:
        return None
    port = code is False or not result.environment_diff.same_framework
    likely = code is True and not port and any(not c.unknown for c in changes)
    return RoundoffCause(closest[1], closest[2], closest[3], result.environment_diff.kernel_changes, port, likely)
