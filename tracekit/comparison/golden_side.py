"""The golden's side of a kink, searched without taps: which of the float64 port's ReLU
decisions nearest their kink the golden's float32 took the other way (comparison/arbiter.py
explains the step when a float64 replay with them turned over agrees with the golden on every
tensor; tf2/arbiter.py runs those replays). Numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from .arbiter import EPS32, KINK_ULPS, SHOWN, Flip
from .stats import Stats

# The CANDIDATES pre-activations nearest the kink (within KINK_ULPS), turned over in at most REPLAYS
# one-step float64 replays.
CANDIDATES, REPLAYS = 6, 12


@dataclass(frozen=True, eq=False)  # compared by identity: it holds its layer's array
class Near:
    """A pre-activation of the float64 port within KINK_ULPS of a ReLU's kink."""

    margin: float  # in float32 eps x the layer's largest |pre-activation|
    layer: int
    name: str  # the layer's
    element: int  # flat
    z: np.ndarray  # the layer's pre-activations


def near_kink(layers: Iterable[Tuple[int, str, Optional[np.ndarray]]]) -> List[Near]:
    """The CANDIDATES pre-activations nearest a kink over `layers` ((index, name, its
    pre-activations or None)), nearest first."""
    near: List[Near] = []
    for index, name, z in layers:
        if z is not None and np.size(z) and np.isfinite(z).all():
            z = np.asarray(z, dtype=np.float64)
            margin = np.abs(z).ravel() / (EPS32 * (float(np.abs(z).max()) or 1.0))
            near += [Near(float(margin[e]), index, name, int(e), z) for e in np.flatnonzero(margin <= KINK_ULPS)]
    return sorted(near, key=lambda n: n.margin)[:CANDIDATES]


# flip arrays ({layer index: -1/0/+1 per pre-activation}) -> the float64 replay's (stats, variables its
# update rule explains), or None where it could not run
Trial = Callable[[Dict[int, np.ndarray]], "Tuple[Dict[str, Stats], Tuple[str, ...]] | None"]


def search(near: List[Near], stats: Mapping[str, Stats],
           float64_with: Trial) -> "Tuple[Dict[str, Stats], Tuple[str, ...], Tuple[Flip, ...]] | None":
    """The decisions the golden's float32 took the other way, found greedily: each round turns over
    the candidate (`near`) that, with those already chosen, brings the float64 replay
    (`float64_with`) closest to the golden, until it agrees on every tensor: then (its stats, the
    variables its update rule explains, the Flips); None when no candidate brings it closer, the
    replays run out, or the float64 port cannot run."""
    chosen: List[Near] = []
    best, replays = distance(stats), 0
    while len(chosen) < len(near) and replays < REPLAYS:
        round_best: "Tuple[float, Near] | None" = None
        for candidate in [n for n in near if n not in chosen][:REPLAYS - replays]:
            replays += 1
            ran = float64_with(flip_arrays(chosen + [candidate]))
            if ran is None:
                return None
            if all(s.ok for s in ran[0].values()):
                return ran[0], ran[1], flip_records(chosen + [candidate])
            moved = distance(ran[0])
            if moved < best and (round_best is None or moved < round_best[0]):
                round_best = (moved, candidate)
        if round_best is None:
            return None
        best = round_best[0]
        chosen.append(round_best[1])
    return None


def distance(stats: Mapping[str, Stats]) -> float:
    """How far a float64 replay is from the golden: its failing tensors' errors, summed in log ulps."""
    return sum(math.log2(2.0 + min(s.ulps, 1e30)) for s in stats.values() if not s.ok)


def flip_arrays(chosen: List[Near]) -> Dict[int, np.ndarray]:
    out: Dict[int, np.ndarray] = {}
    for n in chosen:
        flip = out.setdefault(n.layer, np.zeros(n.z.shape, dtype=np.float64))
        at = np.unravel_index(n.element, n.z.shape)
        flip[at] = 1.0 if n.z[at] <= 0 else -1.0  # let through where float64 cut it, and the reverse
    return out


def flip_records(chosen: List[Near]) -> Tuple[Flip, ...]:
    out = []
    for layer in sorted({n.layer for n in chosen}):
        mine = [n for n in chosen if n.layer == layer]
        where = tuple(tuple(int(i) for i in np.unravel_index(n.element, n.z.shape)) for n in mine)
        out.append(Flip("layer %s (pre-activation)" % mine[0].name, "zero", len(mine), int(mine[0].z.size),
                        where[:SHOWN], min(n.margin for n in mine)))
    return tuple(out)
