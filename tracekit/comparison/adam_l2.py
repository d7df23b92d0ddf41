"""An L2 term added to the gradient inside Adam: PyTorch's `torch.optim.Adam(weight_decay=wd)`
(and optax's `add_decayed_weights` chained before `scale_by_adam`) feed g + wd W to the moments,
where TF1's AdamOptimizer feeds g (a decay TF1 has is decoupled, or in the loss, where the
gradient the golden records holds it). The port's recorded gradient is the one before the term:
only its update shows it, and Adam's normalized step hides most of it (a first step from zero
moments is about sign(g + wd W) per element), so no change of alpha, epsilon or a decoupled decay
fits it; a fit of epsilon on a few elements may, and names the wrong setting.

The port's move is predicted from the state the step started from (the golden's: teacher-forced)
with the golden's gradient g and moments before the step (from the verified moments after it:
m = b1 m0 + (1 - b1) g), the golden's alpha (its bias correction included):
    m' = b1 m0 + (1 - b1)(g + wd W),  v' = b2 v0 + (1 - b2)(g + wd W)^2,
    W' = W - alpha m' / (sqrt(v') + eps) - decay W,
with eps the golden's, or in the port's place after the bias correction (eps sqrt(1 - b2^t),
PyTorch's and optax's), and the golden's decoupled decay kept or left out (Adam with
weight_decay= for an AdamW-like TF1 optimizer). wd is scanned over decades, refined, snapped to
a usual value; named where the prediction passes the comparison's tolerance (fitting.explains)
and the same prediction without the term does not (else it is an epsilon's slip, not this).
numpy only; Python 3.7 syntax.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..keys import make_key, split_key
from . import adam, epsilon
from .explained import Explained, largest
from .fitting import explains, f64, refined

ADAM_L2 = "l2-inside-adam"
# weight_decay= values teams pass to torch.optim.Adam (a coefficient of W, not times the learning rate)
WEIGHT_DECAYS = (0.1, 0.05, 0.01, 0.005, 0.001, 5e-4, 1e-4, 5e-5, 1e-5)
SETTINGS_TRIED = 3  # the variables' own fits (the largest variables') tried as the one setting
GRID = tuple(10.0 ** (e / 4) for e in range(-7 * 4, 1))  # 1e-7 .. 1, four steps a decade

Moments = Tuple[np.ndarray, np.ndarray, Tuple[float, float]]  # adam.moments: m, v after the step, betas


def fit(key: str, start: Any, g_value: Any, a_value: Any, tol: Any, recorded: Mapping[str, Any],
        moments: Moments, counts: Sequence[int], epsilons: Sequence[float],
        like: Optional[Explained] = None) -> Optional[Explained]:
    """The port's update of variable `key` as Adam's on g + wd W (module doc); None where it
    does not explain it, or explains it without the term. `like`: another variable's fit, whose
    wd, epsilon and decoupled decay are held on this one (which may not show the term)."""
    grad_key = make_key("grad", split_key(key)[1])
    if grad_key not in recorded:
        return None
    m1, v1, (b1, b2) = moments
    g, w, wanted = f64(recorded[grad_key]), f64(start), f64(a_value)
    m1, v1 = m1.reshape(-1), v1.reshape(-1)
    if not g.shape == w.shape == m1.shape:
        return None
    m0, v0 = (m1 - (1 - b1) * g) / b1, (v1 - (1 - b2) * g * g) / b2
    move, root = f64(g_value) - w, np.sqrt(np.maximum(v1, 0.0))
    found = adam.adam_fit(move, m1, root, w)
    if found is None:
        return None
    golden = adam.snapped(found, move, m1, root, w, {"eps": epsilons, "decay": (0.0,)})
    s = epsilon.sample(v1, wanted - f64(g_value))
    before = largest(f64(g_value), wanted)

    def predict(wd: float, form: Mapping[str, float], at: Any = slice(None)) -> np.ndarray:
        g2 = g[at] + wd * w[at]
        m, v = b1 * m0[at] + (1 - b1) * g2, b2 * v0[at] + (1 - b2) * g2 * g2
        decay = golden["decay"] if form["kept"] else 0.0
        return w[at] - golden["alpha"] * m / (np.sqrt(np.maximum(v, 0.0)) + form["eps"]) - decay * w[at]

    def passes(wd: float, form: Mapping[str, float]) -> Optional[float]:
        return explains(predict(wd, form), wanted, before, tol)
    if like is not None:
        form = {"eps": like.detail["eps"], "after": like.detail["after_correction"],
                "kept": like.detail["decoupled_kept"] if golden["decay"] != 0 else 1.0}
        ulps = passes(like.port, form)
        return None if ulps is None else Explained(key, ADAM_L2, 0.0, like.port, ulps, dict(like.detail))

    def scanned(form: Mapping[str, float]) -> Tuple[float, float]:
        """(the largest error left on the sample, wd) at the best wd of GRID."""
        return min((largest(predict(x, form, s), wanted[s]), x) for x in GRID)

    def verified(form: Mapping[str, float], wd: float) -> Optional[Tuple[float, float]]:
        wd = refined({"wd": wd}, ["wd"], lambda p: predict(p["wd"], form, s), wanted[s])["wd"]
        ulps = passes(wd, form)
        if ulps is None or passes(0.0, form) is not None:
            return None  # no fit, or one the term is not needed for: an epsilon's slip
        for usual in sorted(WEIGHT_DECAYS, key=lambda x: abs(np.log(x / wd))):
            snapped = passes(usual, form)
            if snapped is not None:
                return snapped, usual
        return ulps, wd
    # The port's epsilon TF1's first, then the usual ones; in each, a form where a usual wd explains
    # first, then the one claiming least (TF1's epsilon place, its decoupled decay kept): where
    # epsilon does not show, no place is claimed. A form whose best wd of the scan leaves as much as
    # no change does is not refined (each refinement and check costs predictions of the whole tensor).
    for forms in _forms(golden, b2, counts, epsilons):
        fitted = []
        for form in forms:
            left, wd = scanned(form)
            found = verified(form, wd) if left < before else None
            if found is not None:
                fitted.append((found[1] not in WEIGHT_DECAYS, form, found))
        if fitted:
            _, form, (ulps, wd) = min(fitted, key=lambda item: item[0])
            detail = {"eps": form["eps"], "after_correction": form["after"], "decoupled_kept": form["kept"],
                      "beta_2": b2}
            return Explained(key, ADAM_L2, 0.0, wd, ulps, detail)
    return None


def one_setting(found: Sequence[Explained], adams: Mapping[str, Tuple[Any, ...]], recorded: Mapping[str, Any],
                counts: Sequence[int], epsilons: Sequence[float]) -> Dict[str, Explained]:
    """The term is one setting of the optimizer: of the variables' own fits in `found` (the
    largest variables' first), with epsilon in each place, the one held on most variables of
    `adams` (key -> fit's arguments: start, golden's and port's values, tolerance, moments), by
    key, each verified. A first step, about sign(g + wd W), bounds wd only to an interval,
    narrower the more elements, and shows epsilon's place only where |g| is near epsilon; where
    the term hides, a few elements fit another epsilon, or TF1's decoupled decay left out alone:
    the same setting, seen in part."""
    def hold(like: Explained) -> Dict[str, Explained]:
        fitted = {key: fit(key, *args[:4], recorded, args[4], counts, epsilons, like) for key, args in adams.items()}
        return {key: e for key, e in fitted.items() if e is not None}
    named = sorted((e for e in found if e.code == ADAM_L2), key=lambda e: -np.size(adams[e.key][0]))
    best: Dict[str, Explained] = {}
    for like in (v for e in named[:SETTINGS_TRIED] for v in _placed(e, counts)):
        held = hold(like)
        best = held if len(held) > len(best) else best
        if len(best) == len(adams):
            break
    return best


def _placed(like: Explained, counts: Sequence[int]) -> List[Explained]:
    """A fit, then its epsilon in each other place: where TF1 adds it, after the bias correction
    at each step count the step may have had."""
    b2, at = like.detail["beta_2"], int(like.detail["after_correction"])
    base = like.detail["eps"] / (np.sqrt(1 - b2 ** at) if at else 1.0)
    return [like] + [replace(like, detail=dict(like.detail, eps=base * (float(np.sqrt(1 - b2 ** t)) if t else 1.0),
                                               after_correction=float(t))) for t in (0, *counts) if t != at]


def _forms(golden: Mapping[str, float], b2: float, counts: Sequence[int],
           epsilons: Sequence[float]) -> List[List[Dict[str, float]]]:
    """The port's epsilon (where TF1 adds it, or after the bias correction at a step count the
    step may have had) and decoupled decay (the golden's kept, or none): first with the golden's
    epsilon, then with the usual ones."""
    kept = [1.0] + ([0.0] if golden["decay"] != 0 else [])

    def placed(values: Sequence[float], places: Sequence[int]) -> List[Dict[str, float]]:
        """Each epsilon at each place: 0 where TF1 adds it, t after the bias correction at count t."""
        return [{"eps": e * (float(np.sqrt(1 - b2 ** t)) if t else 1.0), "after": float(t), "kept": k}
                for k in kept for t in places for e in values]
    others = [e for e in epsilons if e != golden["eps"]]
    # the golden's epsilon is fitted to its own move, which hides it where |g| is far above it: a usual
    # one where TF1 adds it is the golden's as much
    return [placed([golden["eps"]], [0, *counts]) + placed(others, [0]), placed(others, counts)]
