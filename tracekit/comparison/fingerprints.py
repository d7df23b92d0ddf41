"""Slip fingerprints: the port's update of a variable, taken from the golden's state, fitted to
the golden's update changed as migrating teams change it, and named only when the fit explains
the difference to the comparison's own tolerance.

At the first divergence's step each failing variable has three values that matter: W, the state
the step started from (the golden's: a teacher-forced replay loaded it), the golden's move G and
the port's move A. Two families of update are fitted:

- Adam's, where the golden's slots of the variable are verified, at that step, to be Adam's
  moments (m' = b1 m + (1 - b1) g and v' = b2 v + (1 - b2) g^2 with the golden's gradient g, each
  to the slot's tolerance). Then each side's move is fitted, by least squares over its elements,
  to  -alpha m' / (sqrt(v') + eps) - decay W,  which holds TF1's AdamOptimizer, Keras Adam and
  AdamW (bias correction is a factor of alpha) and google-research/bert's AdamWeightDecay.
- Any other update: A = scale G - decay W.

The golden's move is then changed in the fewest parameters (alpha, eps, decay; or scale, decay)
to the port's fitted values, and the prediction W + changed move is compared with the port's
value at the tolerance the comparison used: a fingerprint names the changed parameters only if
that comparison passes. A correct port passes before any of this runs; and a difference of
round-off alone fits no change of a parameter beyond RTOL.

A gradient that fails first is fitted the same way (A = scale G + l2 W): a factor every gradient
shares (a sum against a mean, the batch or replica count) or an L2 term in the loss.

Results are data (report/hints.py renders them); numpy only.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..errors import UsageError
from ..keys import make_key, split_key
from ..store import Trace
from ..store.meta import ReplayMeta
from .slips import batch_size
from .stats import compare_values
from .tolerance import Resolved

LR_FACTOR = "lr-factor"
SIGN = "update-sign"
BIAS_CORRECTION = "bias-correction"
EPSILON = "epsilon"
DECAY_ADDED = "weight-decay-added"
DECAY_MISSING = "weight-decay-missing"
DECAY_RATE = "weight-decay-rate"
GRAD_SCALE = "gradient-scale"
L2_IN_LOSS = "l2-in-loss"

RTOL = 1e-3  # a fitted parameter that differs from the golden's by less is the golden's
DECAYS = (0.1, 0.05, 0.02, 0.01, 0.005, 0.001, 5e-4, 1e-4)  # weight decays teams use, times the learning rate
EPSILONS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-10)  # the epsilons optimizers default to, or teams pass
LEFT = 0.25  # a fit must leave at most this fraction of the largest difference, and that within the tolerance
ABSENT = 0.02
EPS32 = float(np.finfo(np.float32).eps)
PROPORTIONAL_ULPS = 8.0  # a difference proportional to the value is a departure from this many ulps of its scale
EXPLAINED = 0.9  # ... where the proportion explains this fraction of the difference's energy  # a decay under this fraction of the other side's is none (what a fit leaves of zero)
FIT_ELEMENTS = 1 << 20  # elements a least-squares fit uses (a fixed stride over larger tensors)
# A fit needs this many elements per parameter it fits, or any few numbers fit (a one-element
# variable "explains" any difference as a factor).
ELEMENTS_PER_PARAMETER = 4
BIAS_T_MAX = 10_000  # the largest optimizer step count a bias-correction factor is matched at

# Resolves the comparison's tolerance for (kind, name, step, dtype name).
Resolve = Callable[[str, str, int, str], Resolved]


@dataclass(frozen=True)
class Fingerprint:
    """`code` names the transformation; `keys` the tensors it explains at `step`; `golden` and
    `port` the parameter on each side (a factor: 1 and the factor; a decay: the rate, or the
    coefficient where no learning rate is known); `ulps` the largest difference the fitted
    change leaves, in ulps of the tensor's scale; `detail` what else the fit found (the
    optimizer step count of a bias correction, the learning rate a decay rate is divided by)."""

    code: str
    step: int
    keys: Tuple[str, ...]
    golden: float
    port: float
    ulps: float
    detail: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Fit:
    """One tensor's explanation: the changed parameters, name -> (golden, port), and the residual."""

    key: str
    changed: Dict[str, Tuple[float, float]]
    ulps: float
    betas: Optional[Tuple[float, float]] = None
    counts: Tuple[int, ...] = ()  # the optimizer step counts a bias correction may have used


def from_golden_state(replay: Optional[ReplayMeta], step: int) -> bool:
    """Whether the replay's `step` started from the golden's state (the replay's meta says so):
    only there is the port's value minus the golden's state the port's own update."""
    if replay is None or step < 0:
        return False
    return replay.forcing == "state" or step in replay.restarted_at or (step == 0 and replay.init == "golden")


def proportional(golden: Any, actual: Any, start: Any, eps: float) -> Optional[float]:
    """c where the port's value minus the golden's is -c x the state the step started from, on
    (nearly) every element and far beyond round-off: the signature of a weight decay one side
    applies, which one step keeps within any tolerance (lr x decay: 1e-5 of the value for
    BERT's 1e-3 and 0.01). Round-off is not proportional to the state: its signs go either way,
    and a scalar rounded otherwise (a learning rate) scales the move, not the state. None where
    the difference is otherwise."""
    g, a, w = _f64(golden), _f64(actual), _f64(start)
    if g.size < 4 * ELEMENTS_PER_PARAMETER or not (a.shape == g.shape == w.shape) or \
            not (np.all(np.isfinite(g)) and np.all(np.isfinite(a)) and np.all(np.isfinite(w))):
        return None
    d = a - g
    largest, scale = float(np.max(np.abs(d))), float(np.max(np.abs(g)))
    energy = float(np.dot(w, w))
    if largest < PROPORTIONAL_ULPS * eps * scale or energy == 0:
        return None
    c = -float(np.dot(d, w)) / energy
    left = d + c * w
    explained = 1 - float(np.dot(left, left)) / float(np.dot(d, d))
    return c if float(np.max(np.abs(left))) <= LEFT * largest and explained >= EXPLAINED else None


def fingerprints(golden: Trace, step: int, values: Mapping[str, Tuple[Any, Any]], resolve: Resolve,
                 first_kind: str) -> List[Fingerprint]:
    """The fingerprints of the failing tensors at `step` (their key -> (golden, port) values),
    where the first divergence is of `first_kind` and the step started from the golden's state
    (from_golden_state); [] where nothing fits to the tolerance."""
    if step < 0 or first_kind not in ("var", "slot", "grad"):
        return []
    try:
        before = golden.state_before(step)
    except UsageError:  # no state before the step (a digest golden): nothing to fit from
        return []
    recorded = golden.step(step)
    batch, rate = batch_size(golden, step), _learning_rate(golden, step)
    decays = [0.0] + ([rate * d for d in DECAYS] if rate is not None else [])
    grad_factors = [-1.0] + ([float(batch), 1.0 / batch] if batch and batch > 1 else [])
    fits: List[_Fit] = []
    for key, (g_value, a_value) in values.items():
        kind, name = split_key(key)
        if kind not in ("var", "grad") or (kind == "grad") != (first_kind == "grad"):
            continue
        start = before.get(make_key("var", name))
        fit = None
        if start is not None and _numeric(start, g_value, a_value):
            tol = resolve(kind, name, step, np.asarray(a_value).dtype.name)
            fit = _fit_grad(key, start, g_value, a_value, tol, grad_factors) if kind == "grad" else \
                _fit_var(golden, step, key, start, g_value, a_value, tol, before, recorded, decays)
        if fit is not None and fit.changed:
            fits.append(fit)
    return _named(golden, step, fits)


def _numeric(*values: Any) -> bool:
    arrays = [np.asarray(v) for v in values]
    return all(a.dtype.kind == "f" and a.shape == arrays[0].shape and a.size > 0 for a in arrays)


def _f64(value: Any) -> np.ndarray:
    return np.asarray(value, np.float64).reshape(-1)


def _lstsq(columns: Sequence[np.ndarray], target: np.ndarray) -> Optional[np.ndarray]:
    """Least squares over at most FIT_ELEMENTS elements, columns scaled to unit norm first (the
    moments, moves and weights differ by orders of magnitude)."""
    if target.size < ELEMENTS_PER_PARAMETER * len(columns):
        return None
    stride = max(1, target.size // FIT_ELEMENTS)
    matrix = np.stack([c[::stride] for c in columns], axis=1)
    norms = np.linalg.norm(matrix, axis=0)
    if not np.all(np.isfinite(matrix)) or np.any(norms == 0):
        return None
    solution = np.linalg.lstsq(matrix / norms, target[::stride], rcond=None)[0]
    return solution / norms


def _smallest_change(names: Sequence[str], golden: Mapping[str, float], port: Mapping[str, float],
                     predict: Callable[[Mapping[str, float]], np.ndarray], actual: Any, tol: Resolved,
                     exact: Optional[Mapping[str, Sequence[float]]] = None,
                     ) -> Optional[Tuple[Dict[str, Tuple[float, float]], float]]:
    """The fewest parameters to take from the port's fit, in `names` order, for the golden's
    update to predict the port's value within the tolerance: (name -> (golden, port), the ulps
    left), or None where no set does. A parameter takes the nearest of its `exact` values (those
    a known transformation gives it) wherever the prediction still passes with it."""
    differ = [n for n in names if not _same(golden[n], port[n])]
    wanted = np.asarray(actual, np.float64)
    before = float(np.max(np.abs(predict(golden).reshape(wanted.shape) - wanted)))

    def passes(values: Mapping[str, float]) -> Optional[float]:
        predicted = predict(values).reshape(wanted.shape)
        if not float(np.max(np.abs(predicted - wanted))) <= LEFT * before:  # a nudge under the tolerance: no
            return None
        stats = compare_values(predicted, wanted, tol)
        return stats.ulps if stats.ok else None
    for size in range(1, len(differ) + 1):
        for subset in itertools.combinations(differ, size):
            chosen = _refined({n: (port[n] if n in subset else golden[n]) for n in names}, subset, predict,
                              wanted.reshape(-1))
            ulps = passes(chosen)
            if ulps is None:
                continue
            for name in subset:
                for value in sorted((exact or {}).get(name, ()), key=lambda v: abs(v - chosen[name])):
                    snapped = passes({**chosen, name: value})
                    if snapped is not None:
                        chosen, ulps = {**chosen, name: value}, snapped
                        break
            return {n: (golden[n], chosen[n]) for n in subset}, ulps
    return None


def _refined(chosen: Dict[str, float], subset: Sequence[str], predict: Callable[[Mapping[str, float]], np.ndarray],
             wanted: np.ndarray) -> Dict[str, float]:
    """The least-squares values tuned to the largest error, each within a factor of 2: the linear
    fit weighs every element alike, where an epsilon shows in the few whose sqrt(v) is near it."""
    def worst(values: Mapping[str, float]) -> float:
        return float(np.max(np.abs(predict(values).reshape(-1) - wanted)))
    best = dict(chosen)
    for _ in range(2):  # coordinate descent, twice round
        for name in subset:
            start = best[name]
            low, high = -1.0, 1.0  # golden-section search of log2(value / start)
            ratio = (np.sqrt(5) - 1) / 2
            for _ in range(40):
                a, b = high - ratio * (high - low), low + ratio * (high - low)
                if worst({**best, name: start * 2 ** a}) <= worst({**best, name: start * 2 ** b}):
                    high = b
                else:
                    low = a
            candidate = {**best, name: start * 2 ** ((low + high) / 2)}
            if worst(candidate) <= worst(best):
                best = candidate
    return best


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= RTOL * max(abs(a), abs(b), 1e-30)


def _fit_plain(key: str, start: Any, g_value: Any, a_value: Any, tol: Resolved, sign: float,
               factors: Sequence[float] = (), decays: Sequence[float] = (0.0,)) -> Optional[_Fit]:
    """A = scale G + sign * coefficient W, the golden being scale 1, coefficient 0; `factors`
    and `decays`: the scales and coefficients known transformations give."""
    w = _f64(start)
    g, a = _f64(g_value) - w, _f64(a_value) - w
    solution = _lstsq([g, sign * w], a)
    if solution is None:
        return None
    port = {"scale": float(solution[0]), "decay": float(solution[1])}
    found = _smallest_change(["scale", "decay"], {"scale": 1.0, "decay": 0.0}, port,
                             lambda p: w + p["scale"] * g + sign * p["decay"] * w, a_value, tol,
                             {"scale": factors, "decay": list(decays) + [-d for d in decays]})
    return None if found is None else _Fit(key, *found)


def _fit_grad(key: str, start: Any, g_value: Any, a_value: Any, tol: Resolved,
              factors: Sequence[float]) -> Optional[_Fit]:
    """A gradient: the port's = scale x the golden's + l2 x W (an L2 term l2/2 |W|^2 in the loss)."""
    w = _f64(start)
    g, a = _f64(g_value), _f64(a_value)
    solution = _lstsq([g, w], a)
    if solution is None:
        return None
    port = {"scale": float(solution[0]), "l2": float(solution[1])}
    found = _smallest_change(["scale", "l2"], {"scale": 1.0, "l2": 0.0}, port,
                             lambda p: p["scale"] * g + p["l2"] * w, a_value, tol, {"scale": factors})
    return None if found is None else _Fit(key, *found)


def _fit_var(golden: Trace, step: int, key: str, start: Any, g_value: Any, a_value: Any, tol: Resolved,
             before: Mapping[str, Any], recorded: Mapping[str, Any], decays: Sequence[float]) -> Optional[_Fit]:
    """A variable's update: Adam's form where its moments are verified, else a scale and a decay;
    `decays`: the decay coefficients usual rates give at the step's learning rate."""
    moments = _moments(golden, split_key(key)[1], before, recorded)
    fits = None if moments is None else _adam_fits(start, g_value, a_value, moments[0], moments[1])
    betas, counts = moments and moments[2], _counts(before, step)
    if fits is None:  # a factor or a decay still fits; verified betas still name a factor a bias correction
        plain = _fit_plain(key, start, g_value, a_value, tol, -1.0, _known_factors(betas, counts), decays)
        return None if plain is None else replace(plain, betas=betas, counts=counts)
    m, v = moments[0], moments[1]  # type: ignore[index]
    w = _f64(start)
    g_move = _f64(g_value) - w
    root = np.sqrt(np.maximum(v, 0.0))
    golden_fit = _snapped(fits[0], g_move, m, root, w, {"eps": EPSILONS, "decay": decays})
    port_fit = fits[1]
    # The golden's own Adam part, as it moved (its round-off kept), rescaled to other parameters.
    adam_part = g_move + golden_fit["decay"] * w

    def predict(p: Mapping[str, float]) -> np.ndarray:
        return w + adam_part * (p["alpha"] / golden_fit["alpha"]) * (root + golden_fit["eps"]) / (root + p["eps"]) - \
            p["decay"] * w
    factors = _known_factors(betas, counts)
    found = _smallest_change(["alpha", "eps", "decay"], golden_fit, port_fit, predict, a_value, tol,
                             {"alpha": [golden_fit["alpha"] * f for f in factors], "eps": EPSILONS,
                              "decay": decays})
    if found is None:
        return None
    changed = found[0]
    if "alpha" in changed and "decay" in changed and _same(*(a / g for g, a in (changed["alpha"], changed["decay"]))):
        # the whole step scaled, its decay with it: one factor of the learning rate
        changed = {"rate": (1.0, changed["alpha"][1] / changed["alpha"][0]),
                   **{k: v for k, v in changed.items() if k not in ("alpha", "decay")}}
    return _Fit(key, changed, found[1], betas, counts)


def _known_factors(betas: Optional[Tuple[float, float]], counts: Sequence[int]) -> List[float]:
    """The factors known transformations put on a step: a sign, Adam's bias correction (or its
    removal) at each step count the step may have had."""
    factors = [-1.0]
    if betas is not None:
        for t in counts:
            correction = float(np.sqrt(1 - betas[1] ** t) / (1 - betas[0] ** t))
            factors += [correction, 1 / correction]
    return factors


def _counts(before: Mapping[str, Any], step: int) -> Tuple[int, ...]:
    """The optimizer step counts a bias correction may use at `step`: the step's own count, and
    one more than each integer scalar variable of the state it started from (a step counter)."""
    counts = [step + 1]
    for key, value in before.items():
        array = np.asarray(value)
        if split_key(key)[0] == "var" and array.size == 1 and array.dtype.kind in "iu":
            counts.append(int(array.reshape(-1)[0]) + 1)
    return tuple(sorted(set(c for c in counts if 0 < c <= BIAS_T_MAX)))


def _adam_fits(start: Any, g_value: Any, a_value: Any, m: np.ndarray,
               v: np.ndarray) -> Optional[Tuple[Dict[str, float], Dict[str, float]]]:
    """Each side's Adam parameters (see _adam_fit), or None where either does not fit."""
    w = _f64(start)
    root = np.sqrt(np.maximum(v, 0.0))
    golden_fit, port_fit = _adam_fit(_f64(g_value) - w, m, root, w), _adam_fit(_f64(a_value) - w, m, root, w)
    return None if golden_fit is None or port_fit is None else (golden_fit, port_fit)


def _snapped(fit: Dict[str, float], move: np.ndarray, m: np.ndarray, root: np.ndarray, w: np.ndarray,
             exact: Mapping[str, Sequence[float]]) -> Dict[str, float]:
    """The golden's Adam parameters, each at the nearest of its `exact` values where that fits the
    golden's own move as well, to an ulp of the variable: a fit of few elements is noisy."""
    def worst(p: Mapping[str, float]) -> float:
        return float(np.max(np.abs(move + p["alpha"] * m / (root + p["eps"]) + p["decay"] * w)))
    slack = EPS32 * max(float(np.max(np.abs(w))), float(np.max(np.abs(move))), 1e-30)
    out = dict(fit)
    for name, values in exact.items():
        for value in sorted(values, key=lambda x: abs(x - out[name])):
            if worst({**out, name: value}) <= worst(out) + slack:
                out[name] = value
                break
    return out


def _adam_fit(move: np.ndarray, m: np.ndarray, root: np.ndarray, w: np.ndarray) -> Optional[Dict[str, float]]:
    """move = -alpha m / (root + eps) - decay w, as the linear system
    move root = -alpha m - eps move - decay w root - (decay eps) w."""
    solution = _lstsq([-m, -move, -w * root, -w], move * root)
    if solution is None or not solution[0] != 0:  # a negative alpha: the step's sign flipped
        return None
    return {"alpha": float(solution[0]), "eps": float(solution[1]), "decay": float(solution[2])}


def _moments(golden: Trace, name: str, before: Mapping[str, Any],
             recorded: Mapping[str, Any]) -> Optional[Tuple[np.ndarray, np.ndarray, Tuple[float, float]]]:
    """The variable's first and second moments after the step, and their betas, where two of its
    slots are verified at this step to follow Adam's recursions from the golden's gradient."""
    grad = recorded.get(make_key("grad", name)) if make_key("grad", name) in recorded else None
    if grad is None:
        return None
    g = _f64(grad)
    found: Dict[str, Tuple[np.ndarray, float]] = {}
    for slot, info in (golden.meta.get("slots") or {}).items():
        key = make_key("slot", slot)
        if not isinstance(info, dict) or info.get("var") != name or key not in recorded or key not in before:
            continue
        new, old = _f64(recorded[key]), _f64(before[key])
        if new.shape != g.shape or old.shape != g.shape:
            continue
        for role, source in (("m", g), ("v", g * g)):
            beta = _recursion(new, old, source)
            if beta is not None and role not in found:
                found[role] = (new, beta)
                break
    if "m" not in found or "v" not in found:
        return None
    return found["m"][0], found["v"][0], (found["m"][1], found["v"][1])


def _recursion(new: np.ndarray, old: np.ndarray, source: np.ndarray) -> Optional[float]:
    """beta with new = beta old + (1 - beta) source to float32 round-off, if one exists in (0, 1)."""
    target, basis = new - source, old - source
    denominator = float(np.dot(basis, basis))
    if denominator == 0:
        return None
    beta = float(np.dot(target, basis)) / denominator
    if not 0 < beta < 1:
        return None
    error = np.abs(beta * old + (1 - beta) * source - new)
    scale = max(float(np.abs(new).max()), 1e-30)
    return beta if float(error.max()) <= 64 * np.finfo(np.float32).eps * scale else None


def _learning_rate(golden: Trace, step: int) -> Optional[float]:
    """The golden's one learning rate at `step` (None: none, several, or zero)."""
    names = golden.names("lr")
    values = golden.step(step)
    key = make_key("lr", names[0]) if len(names) == 1 else None
    if key is None or key not in values:
        return None
    rate = float(np.asarray(values[key]).reshape(-1)[0])
    return rate if rate > 0 and np.isfinite(rate) else None


def _bias_step(ratio: float, betas: Optional[Tuple[float, float]], counts: Sequence[int]) -> Optional[Tuple[int, bool]]:
    """(t, the port corrects) where ratio is Adam's bias correction sqrt(1 - b2^t) / (1 - b1^t) at
    one of the step counts t the step may have had (or its inverse). Only those: over all t the
    factor takes most values (2.0 at t = 287 for Adam's defaults)."""
    if betas is None:
        return None
    b1, b2 = betas
    for t in counts:
        factor = np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        if _same(ratio, factor):
            return t, True
        if _same(ratio, 1 / factor):
            return t, False
    return None


def _named(golden: Trace, step: int, fits: List[_Fit]) -> List[Fingerprint]:
    """The fits grouped by transformation: one fingerprint each, listing its tensors, with the
    median of their parameters (a rate every variable shares is that rate)."""
    rate, batch = _learning_rate(golden, step), batch_size(golden, step)
    groups: Dict[str, List[Tuple[_Fit, float, float, Dict[str, float]]]] = {}
    for fit in fits:
        for parameter, (g, a) in fit.changed.items():
            code, g_value, a_value, detail = _describe(parameter, g, a, fit, rate, batch)
            groups.setdefault(code, []).append((fit, g_value, a_value, detail))
    out = [Fingerprint(code, step, tuple(m[0].key for m in members), float(np.median([m[1] for m in members])),
                       float(np.median([m[2] for m in members])), max(m[0].ulps for m in members), members[0][3])
           for code, members in groups.items()]
    return sorted(out, key=lambda f: (-len(f.keys), f.code))


def _none(decay: float, other: float) -> bool:
    """A fitted decay is none where it moves no value by an ulp of float32, or is a small
    fraction of the other side's: what a fit of few elements leaves of zero."""
    return abs(decay) <= EPS32 or abs(decay) <= ABSENT * abs(other)


def _describe(parameter: str, g: float, a: float, fit: _Fit, rate: Optional[float], batch: Optional[int]) -> Tuple[str, float, float, Dict[str, float]]:
    """(code, golden's value, port's value, detail) of one changed parameter."""
    if parameter == "eps":
        return EPSILON, g, a, {}
    if parameter in ("decay", "l2"):
        if parameter == "l2":
            return L2_IN_LOSS, g, a, {}
        detail = {} if rate is None else {"lr": rate}
        g_rate, a_rate = (g / rate, a / rate) if rate is not None else (g, a)
        if _none(g, a):
            return DECAY_ADDED, 0.0, a_rate, detail
        if _none(a, g):
            return DECAY_MISSING, g_rate, 0.0, detail
        return DECAY_RATE, g_rate, a_rate, detail
    factor = float(a / g if parameter in ("alpha", "rate") else a)  # the golden's scale is 1
    if fit.key.startswith("grad/"):
        by_batch = batch is not None and batch > 1 and (_same(factor, batch) or _same(factor, 1 / batch))
        return GRAD_SCALE, 1.0, factor, {"batch": float(batch)} if by_batch else {}
    if _same(factor, -1.0):
        return SIGN, 1.0, -1.0, {}
    bias = _bias_step(factor, fit.betas, fit.counts)
    if bias is not None:
        t, corrects = bias
        return BIAS_CORRECTION, 0.0 if corrects else 1.0, 1.0 if corrects else 0.0, {
            "t": float(t), "factor": factor, "beta_1": fit.betas[0], "beta_2": fit.betas[1]}  # type: ignore[index]
    return LR_FACTOR, 1.0, factor, {}
