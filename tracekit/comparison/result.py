"""What a comparison finds, as data: each tensor's statistics over the steps compared
(TensorResult), the first divergence, and the whole result (Comparison) with what explains it.
Rendering is report/'s; comparer.py fills these in as the steps come."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

from ..keys import make_key, step_label
from ..sources import Paired
from ..store.provenance import Provenance
from .arbiter import Arbitrated
from .asdict import comparison_dict
from .conventions import ConventionHint
from .digests import BITS, DIGEST
from .distribution import DistributionHint
from .envdiff import Change, EnvironmentDiff, Profile
from .noise import Noise
from .races import RacedStep
from .select import Selection
from .series import StatsSeries
from .fingerprints import Fingerprint
from .slips import SlipHint
from .stats import Stats, badness
from .tolerance import Tolerance


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
    judged_steps: Set[int] = field(default_factory=set)  # failing steps a later judgment accepted (tf2/verdict.py)
    misused: str = ""  # a random draw fed as recorded but used otherwise (dropout.py), else ""

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
        worst = "" if self.worst is None else ", worst at %s: max abs %.3g%s" % (
            step_label(self.worst_step if self.worst_step is not None else 0), self.worst.max_abs,
            "" if self.worst.discrete else ", %.3g ulps" % self.worst.ulps)
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
    # the failing updates at the first divergence's step fitted to known transformations (fingerprints.py)
    fingerprints: List[Fingerprint] = field(default_factory=list)
    # the TF1 program's and the port's lines behind the first divergence and the fingerprints' tensors
    sources: Dict[str, Paired] = field(default_factory=dict)
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
    missing_hints: Dict[str, str] = field(default_factory=dict)  # missing key -> what it is, what to do
    not_compared: Dict[str, str] = field(default_factory=dict)  # key -> why
    notes: List[str] = field(default_factory=list)
    short: Optional[str] = None  # why the replay has fewer steps than it should
    # why nothing compared shows the port computed anything (no input and no loss was compared):
    # not a match, however well the rest agrees (store/held.py)
    uncompared: Optional[str] = None
    # "state": a teacher-forced replay (each step from the golden's state): its errors are local.
    forcing: str = "none"
    # what forcing set, by kind, and what of the golden's state it could not, checked at its first step
    forced: Optional[Dict[str, Any]] = None
    # what the replay's optimizers loaded of the golden's initial state, read back (ReplayMeta.loaded)
    loaded: Optional[Dict[str, Any]] = None
    # each learning rate's (golden, port) value by step, the first comparer.LOSSES_KEPT steps
    rates: Dict[str, Dict[int, Tuple[float, float]]] = field(default_factory=dict, repr=False)
    # steps a forced replay excused: the TF1 step's learning rate read its counter after the
    # increment, as the golden's race report and the rates say (races.py)
    raced: List[RacedStep] = field(default_factory=list)
    # Where the golden's data came from: a derived golden (a TF2 run's data) is flagged in reports.
    golden_provenance: Optional[Provenance] = None
    # "local": a long golden judged by each step's own error (teacher-forced), failing steps judged
    # by the float64 arbiter (`arbitration`), and the port's drift from its own state judged
    # against the spread of perturbed replays (`drift`, None where not measured); "plain": the
    # replay compared as it ran (tf2/verdict.py).
    judged: str = "plain"
    # said first in the report where the verdict may not be the one wanted (a long golden judged plain)
    advice: Optional[str] = None
    arbitration: Optional[Arbitrated] = None
    drift: Optional["Comparison"] = None

    def __post_init__(self) -> None:
        self.tolerance = self.profile.tolerance

    @property
    def ok(self) -> bool:
        return self.first_divergence is None and not self.missing and self.short is None and \
            self.uncompared is None and (self.drift is None or self.drift.ok)

    def __bool__(self) -> bool:
        return self.ok

    @property
    def names_a_slip(self) -> bool:
        """The diagnosis names what the port does otherwise than TF1 (a slip, a convention, a
        fitted cause): a fix to make, not a change to accept."""
        return not self.ok and bool(self.slips or self.conventions or self.fingerprints)

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
