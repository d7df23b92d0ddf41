"""Calibrated tolerances: bounds measured from how far a model's own trajectory moves when its
starting state moves by one ulp (tracekit.tf2.calibrate runs those replays; this module turns
what they measured into a Tolerance).

Step 0 stays at the default tolerance: one step of a port from the golden's exact state
matches at the guide's tolerance, and most porting mistakes show there. From step 1, per tensor
and band of steps (1, 2-3, 4-7, ...: round-off grows as training carries it on), the allowance
is the largest deviation the perturbed runs showed times DEFAULT_MARGIN, rounded up to a power of two,
written where it exceeds the floor, the training profile's per-kind allowance (TRAINING_ULPS).
The floor stays because nudging one TF 2 run cannot show how TF 1.15's kernels round
differently from TF 2's (docs/NUMERICS.md, "Calibrated tolerances"). No allowance exceeds
CAP_ULPS: a tensor whose deviation needs more is *unbounded* (its values are round-off, such as
a bias before batch norm under Adam), held at the cap and left to the noise analysis
(comparison/noise.py): the calibrated tolerance then accepts the failures that analysis
explains (accept_noise, one switch for every tensor, as in the training profile) and lists
them. Deviations count in each dtype's own eps: the cap is 1/64 of the scale for float32.
Where the runs were compared as digests (a golden with keyframes), how far each tensor moved
as a whole (its sum, sum of |x| and norm: Stats.moments) becomes a `moments` rule per band too,
with no cap: noise of either sign cancels there, a scaled or shifted layer does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from ..keys import make_key
from .digests import DIGEST
from .result import Comparison
from .tolerance import TRAINING_ULPS, Tolerance, literal

DEFAULT_MARGIN = 1.5  # Megatron-LM's factor over the largest deviation of repeated runs
# 2**17 eps x the tensor's scale: 1/64 of it for float32, below the guide's long-run loss tolerance (rtol
# 0.05). What calibration may loosen by itself stops there: a tensor that one ulp moves further
# is round-off itself, and no bound on its values tests anything.
CAP_ULPS = 2.0 ** 17
CALIBRATED_KINDS = tuple(sorted(TRAINING_ULPS))  # inputs, random draws and learning rates stay exact
FEW = 16  # elements: a tensor this small (a loss, a scalar fetch) is measured over two bands (_reaches)


def bands(steps: int) -> List[Tuple[int, Optional[int]]]:
    """Step ranges (start, stop) covering steps 1..steps-1, doubling in length; the last open."""
    out: List[Tuple[int, Optional[int]]] = []
    start = 1
    while start < steps:
        out.append((start, 2 * start))
        start *= 2
    return out[:-1] + [(out[-1][0], None)] if out else []


@dataclass
class Spread:
    """The largest deviation of the perturbed runs from the unperturbed one, per tensor and
    step, in eps x the tensor's scale at that step (inf: a value not finite in one run only)."""

    deviation: Dict[Tuple[str, str], Dict[int, float]] = field(default_factory=dict)
    # where the runs were compared as digests: how far each tensor moved as a whole (Stats.moments)
    moments: Dict[Tuple[str, str], Dict[int, float]] = field(default_factory=dict)
    few: Set[Tuple[str, str]] = field(default_factory=set)  # tensors of at most FEW elements
    runs: int = 0
    steps: int = 0

    def add(self, run: Comparison) -> None:
        """One perturbed run, compared (exactly) with the unperturbed run as its golden."""
        for tensor in run.tensors:
            if tensor.kind not in CALIBRATED_KINDS:
                continue
            seen = self.deviation.setdefault((tensor.kind, tensor.name), {})
            for step, stats in tensor.by_step.items():
                if 0 < stats.total <= FEW:
                    self.few.add((tensor.kind, tensor.name))
                if step >= 1:  # not step 0 (module doc) nor the initial state (-1)
                    # A digest's problem is a statistic beyond its bound, which an exact comparison
                    # always finds; its ulps and moments measure how far (inf where the shapes differ).
                    broken = stats.nonfinite or (stats.problem is not None and stats.basis != DIGEST)
                    seen[step] = max(seen.get(step, 0.0), float("inf") if broken else stats.ulps)
                    if stats.basis == DIGEST:
                        moved = self.moments.setdefault((tensor.kind, tensor.name), {})
                        moved[step] = max(moved.get(step, 0.0), float("inf") if broken else stats.moments)
        self.runs += 1
        self.steps = max(self.steps, run.steps)

    def largest(self) -> Dict[str, float]:
        """Per kind, the largest deviation over its tensors and steps."""
        out: Dict[str, float] = {}
        for (kind, _), by_step in self.deviation.items():
            out[kind] = max([out.get(kind, 0.0)] + list(by_step.values()))
        return out


@dataclass(frozen=True)
class Bound:
    """A calibrated allowance: `ulps` for tensor kind/name over steps [start, stop)."""

    kind: str
    name: str
    start: int
    stop: Optional[int]
    measured: float  # the largest deviation seen there
    ulps: float

    @property
    def key(self) -> str:
        return make_key(self.kind, self.name)


@dataclass(frozen=True)
class Unbounded:
    """A tensor whose deviation needs more than the cap from `step` on: held at the cap."""

    kind: str
    name: str
    step: int
    measured: float

    @property
    def key(self) -> str:
        return make_key(self.kind, self.name)


@dataclass
class Derived:
    """What derive() made of a spread: the tolerance, its widened rules, the tensors refused."""

    tolerance: Tolerance
    bounds: List[Bound]
    unbounded: List[Unbounded]


def derive(spread: Spread, margin: float = DEFAULT_MARGIN, cap: float = CAP_ULPS) -> Derived:
    """The tolerance covering `spread` x margin above the floor, up to `cap` (module doc; the
    drift envelope lifts it where the float64 arbiter explains every local error)."""
    bounds: List[Bound] = []
    unbounded: List[Unbounded] = []
    for (kind, name), by_step in spread.deviation.items():
        over: Optional[int] = None
        measured = 0.0
        for start, stop, reach in _reaches(spread.steps, (kind, name) in spread.few):
            # a band with no step captured (replay(every=K)) keeps the band before's
            measured = _largest(by_step, start, reach, measured)
            need = margin * measured
            if need <= TRAINING_ULPS[kind]:  # the floor
                continue
            if need > cap:
                over = start if over is None else over
                ulps = cap
            else:
                ulps = need if math.isinf(need) else 2.0 ** math.ceil(math.log2(need))
            last = bounds[-1] if bounds else None
            if last is not None and (last.kind, last.name, last.stop, last.ulps) == (kind, name, start, ulps):
                bounds[-1] = Bound(kind, name, last.start, stop, max(last.measured, measured), ulps)  # one rule
            else:
                bounds.append(Bound(kind, name, start, stop, measured, ulps))
        if over is not None:
            unbounded.append(Unbounded(kind, name, over, max(by_step.values())))
    tolerance = Tolerance(accept_noise=bool(unbounded))
    for kind in CALIBRATED_KINDS:
        tolerance = tolerance.rule(kind=kind, steps=(1, None), ulps=TRAINING_ULPS[kind])
    for bound in bounds:
        tolerance = tolerance.rule(kind=bound.kind, name=literal(bound.name), steps=(bound.start, bound.stop),
                                   ulps=bound.ulps)
    for (kind, name), by_step in spread.moments.items():
        for start, stop, moments in _moment_bands(by_step, spread.steps, margin, TRAINING_ULPS[kind]):
            tolerance = tolerance.rule(kind=kind, name=literal(name), steps=(start, stop), moments=moments)
    return Derived(tolerance, bounds, unbounded)


def _reaches(steps: int, few: bool) -> List[Tuple[int, Optional[int], Optional[int]]]:
    """Each band (start, stop) and the step up to which its deviation is measured: its stop, or
    for a tensor of few elements the next band's. One element's deviation is one draw of
    round-off's spread at a step, and jumps tenfold between neighbouring steps (an 18.5M MLP's
    loss: 3.4e3 eps at step 7 in both replays, 1.3e4 at step 8, the golden 2.0e4 at step 7);
    the largest over many elements is a steadier measure."""
    spans = bands(steps)
    return [(start, stop, spans[i + 1][1] if few and i + 1 < len(spans) else stop)
            for i, (start, stop) in enumerate(spans)]


def _moment_bands(by_step: Dict[int, float], steps: int, margin: float,
                  floor: float) -> List[Tuple[int, Optional[int], float]]:
    """Per band of steps, what a tensor's sums and norm may move as a whole (Stats.moments): the
    largest the runs moved them x margin, at least the floor, rounded up to a power of two; none
    from the first band where a run moved them without bound (a value not finite in one run)."""
    out: List[Tuple[int, Optional[int], float]] = []
    measured = 0.0
    for start, stop in bands(steps):
        measured = _largest(by_step, start, stop, measured)
        if not math.isfinite(measured):
            break
        need = max(margin * measured, floor)
        out.append((start, stop, 2.0 ** math.ceil(math.log2(need))))
    return out


def _largest(by_step: Dict[int, float], start: int, stop: Optional[int], otherwise: float) -> float:
    """The largest value at steps [start, stop), or `otherwise` where none was measured there."""
    inside = [value for step, value in by_step.items() if step >= start and (stop is None or step < stop)]
    return max(inside) if inside else otherwise
