"""The float64 arbiter's judgment: whether one step's local error is the port's, or float32
round-off that a discontinuity amplified.

A ReLU pre-activation a few ulps from zero, a max-pooling window whose two largest elements
are that close, a threshold met by a hair: summed in another order, float32 puts the element
on the other side, and that sample's whole backward path changes. A correct port then differs
from its golden in a third of a gradient's elements. The arbiter replays the step with the port
computing in float64 from the same state and inputs (tf2/arbiter.py) and judges here:

- the float64 port agrees with the golden within the golden's own float32 round-off
  (arbiter_tolerance()) where the float32 port does not: round-off through a discontinuity
  (EXPLAINED). The port computes what the golden computed; its float32 chose the other side.
- the float64 port disagrees too, but the golden's own float32 took the other side: one of its
  taps is zero where the float64 port's is not (or the reverse), within KINK_ULPS of the kink,
  and every forward value (taps, loss, learning rate) agrees otherwise (EXPLAINED, on the
  golden's side). Only a tapped layer can show this: tap the layers with kinks.
  Without taps, the float64 port finds the golden's side itself (tf2/arbiter.py): the
  pre-activations of its ReLUs within KINK_ULPS of the kink are the candidates, and the step is
  replayed in float64 with candidates' decisions turned over, chosen greedily; a replay that then
  agrees with the golden on every tensor reproduces what the golden's float32 did (EXPLAINED, on
  the golden's side, `reproduced`).
- a variable or slot the float64 port disagrees on, whose gradient agrees, is judged by the
  golden's update rule (comparison/downstream.py): Adam's normalization turns a gradient's
  round-off at the noise floor into a learning-rate-sized move, in float64 as in float32.
- otherwise the error is the port's (PORT).
- the float64 port could not run (a port that casts to float32 itself): UNDECIDED, which
  counts as the port's.

The evidence says where: each layer whose decisions differ between the port's float32 and
float64 runs (`Flip`), how many elements, and how far from the kink in float32 ulps.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..errors import TracekitError
from .asdict import plain
from .stats import Stats
from .tolerance import ROUNDOFF_ULPS, Tolerance

EXPLAINED, PORT, UNDECIDED = "round-off", "port", "undecided"
# Goldens longer than this many steps are judged by the local view, the arbiter and the drift
# envelope when the port's factory is given (tf2/verdict.py): beyond a few dozen steps of Adam
# and ReLU a correct port's own trajectory has left the golden's (the Estimator example's at step 13).
LONG_GOLDEN = 20
# Indices of flipped elements a Flip keeps.
SHOWN = 5
# How near its kink an element the golden put on the other side must be, in float32 eps x the
# layer output's scale: the cross-machine bound of a forward value (ROUNDOFF_ULPS).
KINK_ULPS = ROUNDOFF_ULPS["tap"]
FORWARD_KINDS = ("tap", "loss", "lr")


def arbiter_tolerance() -> Tolerance:
    """How close the float64 port must come to the golden: the golden's own float32 round-off
    (the cross-machine bound per kind, Tolerance.roundoff()), with round-off that the noise
    analysis explains accepted (a gradient whose true value is zero)."""
    return replace(Tolerance.roundoff(), accept_noise=True)


@dataclass(frozen=True)
class Flip:
    """A layer whose float32 and float64 runs took the other side of a discontinuity.

    kind "zero": elements zero in one run and not in the other (ReLU, dropout, clipping at
    zero); their margin is the nonzero value. kind "selection": a max-pooling window whose
    chosen element differs; its margin is the chosen elements' difference in float64."""

    layer: str
    kind: str
    elements: int
    total: int
    where: Tuple[Tuple[int, ...], ...]  # up to SHOWN indices of flipped elements
    margin_ulps: Optional[float]  # the smallest distance from the kink, in float32 eps x the layer's scale

    def describe(self) -> str:
        margin = "" if self.margin_ulps is None else ", %.3g ulps from the kink at the closest" % self.margin_ulps
        what = "zero in one precision only" if self.kind == "zero" else "another element chosen"
        return "%s: %d of %d elements %s%s, at %s" % (self.layer, self.elements, self.total, what, margin,
                                                      ", ".join(str(list(i)) for i in self.where))


@dataclass(frozen=True)
class TensorVerdict:
    """One tensor that fails at the step in float32: its error there and the float64 port's, in
    eps x the tensor's scale; `float64_ok`: within the arbiter's tolerance."""

    key: str
    float32_ulps: float
    float64_ulps: float
    float64_ok: bool


@dataclass(frozen=True)
class Arbitration:
    """The arbiter's word on one step's local error."""

    step: int
    verdict: str  # EXPLAINED, PORT or UNDECIDED
    tensors: Tuple[TensorVerdict, ...] = ()
    flips: Tuple[Flip, ...] = ()
    # Tensors the float64 port disagrees on although the float32 port agreed (a port's error
    # that float32 round-off happened to hide is still its error).
    also: Tuple[TensorVerdict, ...] = ()
    seconds: float = 0.0
    error: Optional[str] = None  # why the float64 port could not run (UNDECIDED)
    # EXPLAINED: whose float32 took the other side, "port" or "golden" (then `golden_flips` say where),
    # or for the port's own run (tracekit.tf2.arbiter.crossed) "between" its trajectory and the golden's
    side: str = ""
    golden_flips: Tuple[Flip, ...] = ()
    # the golden's side found by replaying the float64 port with `golden_flips` turned over
    reproduced: bool = False
    # variables (and their slots) whose difference the golden's update rule makes of a gradient that agrees
    by_update: Tuple[str, ...] = ()

    @property
    def explained(self) -> bool:
        return self.verdict == EXPLAINED

    def describe(self) -> str:
        if self.verdict == UNDECIDED:
            return "step %d: undecided, the float64 port could not run: %s" % (self.step, self.error)
        worst = max(self.tensors, key=lambda t: t.float32_ulps, default=None)
        head = "step %d: %s" % (self.step, SIDES.get(self.side, SIDES["port"]) if self.explained
                                else "the port's error")
        if worst is not None:
            head += " (%s: float32 port %.3g ulps, float64 port %.3g ulps from the golden)" % (
                worst.key, worst.float32_ulps, worst.float64_ulps)
        if self.reproduced:
            head += "; the float64 port agrees with the golden on every tensor once it takes the other side of " \
                    "the kink where the golden's float32 did (below)"
        if self.by_update:
            head += "; %s follow%s the golden's update rule from a gradient that agrees (the update's image of " \
                    "its round-off)" % (", ".join(self.by_update[:4]) + (" and %d more" % (len(self.by_update) - 4)
                                                                       if len(self.by_update) > 4 else ""),
                                        "s" if len(self.by_update) == 1 else "")
        return head


def judge(step: int, failing: Mapping[str, Stats], float64: Mapping[str, Stats], flips: Sequence[Flip],
          seconds: float, golden_flips: Sequence[Flip] = (), reproduced: bool = False,
          by_update: Sequence[str] = ()) -> Arbitration:
    """The verdict on step `step`: `failing` are the float32 port's failing tensors there (key ->
    its statistics against the golden), `float64` every tensor of the float64 port's replay of the
    step against the golden, under arbiter_tolerance(), with the variables `by_update` names
    counted as agreeing (downstream.by_update); `flips` where the port's float32 and float64 runs
    decided differently, `golden_flips` where the golden and the float64 port did: at the
    golden's taps, or (`reproduced`) the decisions turned over in the float64 replay `float64`
    comes from."""
    tensors = []
    for key, stats in sorted(failing.items()):
        other = float64.get(key)
        tensors.append(TensorVerdict(key, stats.ulps, float("inf") if other is None else other.ulps,
                                     other is not None and other.ok))
    also = tuple(TensorVerdict(key, 0.0, stats.ulps, False) for key, stats in sorted(float64.items())
                 if not stats.ok and key not in failing)
    agrees = bool(tensors) and all(t.float64_ok for t in tensors) and not also
    if agrees or reproduced:
        side = "golden" if reproduced else "port"
        return Arbitration(step, EXPLAINED if agrees else PORT, tuple(tensors), tuple(flips), also, seconds,
                           side=side if agrees else "", golden_flips=tuple(golden_flips), reproduced=agrees and
                           reproduced, by_update=tuple(by_update))
    near = [f for f in golden_flips if f.margin_ulps is not None and f.margin_ulps <= KINK_ULPS]
    forward = forward_agrees(float64)
    verdict, side = (EXPLAINED, "golden") if tensors and near and forward else (PORT, "")
    return Arbitration(step, verdict, tuple(tensors), tuple(flips), also, seconds, side=side,
                       golden_flips=tuple(golden_flips), by_update=tuple(by_update))


def forward_agrees(float64: Mapping[str, Stats]) -> bool:
    """Every forward value of the float64 port (taps, loss, learning rate) agrees with the golden."""
    return all(stats.ok for key, stats in float64.items() if key.split("/", 1)[0] in FORWARD_KINDS)


def step_stats(result: Any, step: int = 0) -> Dict[str, Stats]:
    """A comparison's statistics per tensor at `step` (the arbiter's one-step replays: 0), a
    failure the noise analysis explains counted as agreeing."""
    out = {}
    for tensor in result.tensors:
        stats = tensor.by_step.get(step)
        if stats is None:
            continue
        if not stats.ok and step in tensor.noise:
            stats = copy.copy(stats)
            stats.ok = True
        out[tensor.key] = stats
    return out


def golden_before(golden: Any, index: int) -> Dict[str, Any]:
    """The golden's variables and slots before step `index`, what an update rule is applied to
    (downstream.by_update); {} where it does not keep them whole."""
    try:
        values = golden.state_before(index)
    except TracekitError:
        return {}
    return {key: values[key] for key in values if key.split("/", 1)[0] in ("var", "slot")}


def undecided(step: int, error: str, seconds: float) -> Arbitration:
    return Arbitration(step, UNDECIDED, seconds=seconds, error=error)


SIDES = {"port": "round-off through a discontinuity (the port's float32 took the other side)",
         "golden": "round-off through a discontinuity (the golden's float32 took the other side)",
         "between": "a discontinuity between the port's own trajectory and the golden's"}


# ---- where: the layers whose decisions differ between the float32 and float64 runs ---------------

EPS32 = float(np.finfo(np.float32).eps)


def zero_flips(layer: str, out32: Any, out64: Any) -> Optional[Flip]:
    """Elements zero in one run's layer output and not in the other's (a ReLU, a dropout mask, a
    clip at zero on the other side), or None."""
    a, b = np.asarray(out32, dtype=np.float64), np.asarray(out64, dtype=np.float64)
    if a.shape != b.shape or a.size == 0 or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return None
    zero_a, zero_b = a == 0, b == 0
    if not zero_a.any() and not zero_b.any():
        return None  # no zeros at all: nothing here cuts at zero
    flipped = zero_a != zero_b
    count = int(flipped.sum())
    if not count:
        return None
    scale = float(np.abs(b).max()) or 1.0
    margin = float(np.where(flipped, np.abs(a) + np.abs(b), np.inf).min()) / (EPS32 * scale)
    return Flip(layer, "zero", count, int(a.size), _indices(flipped), margin)


def selection_flips(layer: str, route32: Any, route64: Any, chosen32_at64: Any, input64: Any) -> Optional[Flip]:
    """A max-selecting layer (max-pooling) that chose other elements: `route32`/`route64` are
    each run's gradient of its output's sum with respect to its input (1 where an element was
    chosen), `chosen32_at64` the float32 run's routing of the float64 output back to the
    elements float32 chose, `input64` the float64 run's input. The margin: the float64 window
    maximum less the float64 value of the element float32 chose instead."""
    r32, r64 = np.asarray(route32) != 0, np.asarray(route64) != 0
    if r32.shape != r64.shape:
        return None
    flipped = r32 != r64
    count = int(flipped.sum())
    if not count:
        return None
    x64 = np.asarray(input64, dtype=np.float64)
    chosen = r32 & ~r64  # float32's choice, not float64's
    gap = np.abs(np.asarray(chosen32_at64, dtype=np.float64) - x64)
    scale = float(np.abs(x64).max()) or 1.0
    margin = float(gap[chosen].min()) / (EPS32 * scale) if chosen.any() else None
    # one window's flip moves two elements: count windows
    return Flip(layer, "selection", max(1, int(chosen.sum())), int(r32.size), _indices(chosen if chosen.any()
                                                                                       else flipped), margin)


def _indices(mask: np.ndarray) -> Tuple[Tuple[int, ...], ...]:
    return tuple(tuple(int(i) for i in index) for index in np.argwhere(mask)[:SHOWN])


@dataclass
class Arbitrated:
    """Every step the arbiter judged in one comparison, in order, and what it cost."""

    steps: List[Arbitration] = field(default_factory=list)

    @property
    def explained(self) -> List[Arbitration]:
        return [a for a in self.steps if a.explained]

    @property
    def seconds(self) -> float:
        return sum(a.seconds for a in self.steps)

    def to_dict(self) -> Dict[str, Any]:
        return plain({"seconds": self.seconds, "steps": self.steps})
