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
that comparison passes, leaving at most a quarter of the difference (fitting.py). A correct
port passes before any of this runs; and a difference of round-off alone fits no change of a
parameter beyond fitting.RTOL. Adam's moments and parameters: adam.py.

A gradient that fails first is fitted the same way (A = scale G + l2 W): a factor every gradient
shares (a sum against a mean, the batch or replica count; a clip by global norm where a side's
global norm is round: clipping.py) or an L2 term in the loss.

Where none of those fits, the forms no few continuous parameters give are tried: a gradient
clipped by value on one side (clipping.py), Momentum's conventions where a slot is verified to
be TF1's accumulator (momentum.py), Adam's epsilon inside the square root on one side
(epsilon.py), an L2 term added to the gradient inside Adam (adam_l2.py), a kernel's move
transposed or its last axis's blocks permuted (permuted.py).

Results are data (report/fingerprints.py renders them); numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from ..errors import UsageError
from ..keys import counters_read, make_key, split_key
from ..store import Trace
from ..store.digest import Digest
from ..store.meta import ReplayMeta
from . import adam, adam_l2, clipping, corrected, forms, momentum
from .explained import Explained
from .sampled import SAMPLED, SampledStep, sampled_state, sampled_values, samples
from .fitting import EPS32, f64, lstsq, same, smallest_change
from .slips import batch_size, learning_rate
from .tolerance import Resolved

LR_FACTOR = "lr-factor"
AVERAGE_RATE = "average-rate"  # a variable no gradient moves (a moving average) moved by another factor
SIGN = "update-sign"
BIAS_CORRECTION = "bias-correction"
EPSILON = "epsilon"
DECAY_ADDED = "weight-decay-added"
DECAY_MISSING = "weight-decay-missing"
DECAY_RATE = "weight-decay-rate"
GRAD_SCALE = "gradient-scale"
# a detail key: a replay of the step with one of the port's conversions done another way matched
# (judge/variants.py); its value says what that variant does
VARIANT = "variant"
L2_IN_LOSS = "l2-in-loss"

DECAYS = (0.1, 0.05, 0.02, 0.01, 0.005, 0.001, 5e-4, 1e-4)  # weight decays teams use, times the learning rate
EPSILONS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-10)  # the epsilons optimizers default to, or teams pass
ABSENT = 0.02  # a decay under this fraction of the other side's is none (what a fit leaves of zero)

# Failing variables and gradients at the first divergence's step whose values a comparison keeps
# for the fingerprints, up to this many bytes of them.
FINGERPRINT_BYTES = 256 << 20

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


def fittable(failures: Iterable[Tuple[str, str, Any, Any]]) -> Dict[str, Tuple[Any, Any]]:
    """Of a step's failing tensors (key, kind, golden value, port value), the variables' and
    gradients' two values fingerprints can fit (arrays, or two digests' samples: sampled.py), up
    to FINGERPRINT_BYTES."""
    kept: Dict[str, Tuple[Any, Any]] = {}
    left = FINGERPRINT_BYTES
    for key, kind, g_value, a_value in failures:
        if kind not in ("var", "grad"):
            continue
        if samples(g_value, a_value) is None and not (isinstance(g_value, np.ndarray) and
                                                      isinstance(a_value, np.ndarray)):
            continue
        left -= _nbytes(g_value) + _nbytes(a_value)
        if left < 0:
            break
        kept[key] = g_value, a_value
    return kept


def _nbytes(value: Any) -> int:
    return int(value.sample.nbytes if isinstance(value, Digest) else value.nbytes)


def from_golden_state(replay: Optional[ReplayMeta], step: int) -> bool:
    """Whether the replay's `step` started from the golden's state (the replay's meta says so):
    only there is the port's value minus the golden's state the port's own update."""
    if replay is None or step < 0:
        return False
    return replay.forcing == "state" or step in replay.restarted_at or (step == 0 and replay.init == "golden")


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
    kept = golden.step(step)
    recorded: Mapping[str, Any] = kept
    sampled: Set[str] = set()
    if kept.digests:  # a digest step from the golden's whole state: fitted on the samples (sampled.py)
        recorded = SampledStep(kept)
        before = sampled_state(before, recorded)
        values, sampled = sampled_values(values)
    batch, rate = batch_size(golden, step), learning_rate(golden, step)
    counts = adam.counts(before, step, counters_read(kept.info))  # the step counts a bias correction may use
    decays = [0.0] + ([rate * d for d in DECAYS] if rate is not None else [])
    grad_factors = [-1.0] + ([float(batch), 1.0 / batch] if batch and batch > 1 else [])
    fits: List[_Fit] = []
    found: List[Explained] = []
    adams: Dict[str, Tuple[Any, ...]] = {}  # the variables whose Adam moments are verified: their fits' arguments
    trained = {split_key(k)[1] for k in recorded if k.startswith("grad/")}
    for key, (g_value, a_value) in values.items():
        kind, name = split_key(key)
        if kind not in ("var", "grad") or (kind == "grad") != (first_kind == "grad") or not _numeric(g_value, a_value):
            continue
        start = before.get(make_key("var", name))
        start = start if start is not None and _numeric(start, g_value) else None
        tol = resolve(kind, name, step, np.asarray(a_value).dtype.name)
        variance = None if kind != "var" or start is None or name in trained else \
            corrected.bessel(key, start, g_value, a_value, tol)
        if variance is not None:  # a moving variance: the one correction, not a rate and a decay
            found.append(variance)
            continue
        moments = None if kind == "grad" or start is None else adam.moments(golden, name, before, recorded)
        fit = None
        if start is not None:
            fit = _fit_grad(key, start, g_value, a_value, tol, grad_factors) if kind == "grad" else \
                _fit_var(key, start, g_value, a_value, tol, moments, decays, counts)
        if fit is not None and fit.changed:
            fits.append(fit)
        elif kind == "grad":
            found += forms.gradient(key, g_value, a_value, tol, shaped=key not in sampled)
        elif start is not None:
            found += forms.variable(golden, key, start, g_value, a_value, tol, before, recorded, moments, EPSILONS,
                                    counts, shaped=key not in sampled)
        if moments is not None and start is not None:
            adams[key] = (start, g_value, a_value, tol, moments)
    if any(e.code == adam_l2.ADAM_L2 for e in found):  # one optimizer's setting, on every variable it explains
        held = adam_l2.one_setting(found, adams, recorded, counts, EPSILONS)
        fits = [f for f in fits if f.key not in held]
        found = [e for e in found if e.key not in held] + list(held.values())
    # factors of their own on each gradient, each to one round norm: clipped by its own norm
    scales = {f.key: f.changed["scale"][1] for f in fits if f.key.startswith("grad/") and list(f.changed) == ["scale"]}
    # a clip by norm is told by the gradients' norms, which a sample does not hold
    each = clipping.by_each_norm(scales, recorded) if not sampled else None
    if each is not None:  # each gradient's own scale is the prediction: its fit's ulps stand
        found += [Explained(f.key, clipping.CLIP_EACH_NORM, each[0], each[1], f.ulps, each[2]) for f in fits
                  if f.key in scales]
        fits = [f for f in fits if f.key not in scales]
    # a factor every gradient shares, not the batch size's, may be a clip by global norm
    norm = clipping.global_norm(recorded, golden.names("grad")) if first_kind == "grad" and not sampled else None
    named = [clipping.as_clip(f, norm) if f.code == GRAD_SCALE and "batch" not in f.detail and norm else f
             for f in _named(golden, step, fits, found, trained)]
    # a rate's factor of 1 + mu where every variable's momentum accumulator starts this step: Nesterov's too
    named = [_nesterov_at_start(golden, f, before, recorded) if f.code == LR_FACTOR and not sampled else f
             for f in named]
    # how many gradients the golden holds: a factor on some of them is no scale of the loss
    gradients = float(len({name for name in trained if "@" not in name}))
    named = [replace(f, detail=dict(f.detail, of=gradients)) if f.code == GRAD_SCALE else f for f in named]
    return [replace(f, detail=dict(f.detail, **{SAMPLED: len(sampled & set(f.keys))})) if sampled & set(f.keys)
            else f for f in named]


def _numeric(*values: Any) -> bool:
    arrays = [np.asarray(v) for v in values]
    return all(a.dtype.kind == "f" and a.shape == arrays[0].shape and a.size > 0 for a in arrays)


def _fit_plain(key: str, start: Any, g_value: Any, a_value: Any, tol: Resolved, sign: float,
               factors: Sequence[float] = (), decays: Sequence[float] = (0.0,)) -> Optional[_Fit]:
    """A = scale G + sign * coefficient W, the golden being scale 1, coefficient 0; `factors`
    and `decays`: the scales and coefficients known transformations give."""
    w = f64(start)
    g, a = f64(g_value) - w, f64(a_value) - w
    solution = lstsq([g, sign * w], a)
    if solution is None:
        return None
    golden, port = {"scale": 1.0, "decay": 0.0}, {"scale": float(solution[0]), "decay": float(solution[1])}
    scaled = g  # what the scale multiplies
    # Where the golden's move is itself a multiple of W to round-off (an Adam step of zero moments
    # on every element fitted: a word embedding's unused rows, sampled), a scale of it and a decay
    # explain the port alike, and the fit's split between them is arbitrary: that move is the
    # golden's decay, and each side's decay is fitted.
    ww = float(np.dot(w.ravel(), w.ravel()))
    along = float(np.dot(g.ravel(), w.ravel())) / ww if ww > 0 else 0.0
    if along != 0 and g.size > 1 and float(np.max(np.abs(g - along * w))) <= 2 * EPS32 * float(np.max(np.abs(w))):
        golden = {"scale": 1.0, "decay": sign * along}
        port = {"scale": 1.0, "decay": sign * float(np.dot(a.ravel(), w.ravel())) / ww}
        scaled = np.zeros_like(g)

    def predict(p: Mapping[str, float]) -> np.ndarray:
        return w + p["scale"] * scaled + sign * p["decay"] * w
    found = smallest_change(["scale", "decay"], golden, port, predict, a_value, tol,
                             {"scale": factors, "decay": list(decays) + [-d for d in decays]})
    return None if found is None else _Fit(key, *found)


def _fit_grad(key: str, start: Any, g_value: Any, a_value: Any, tol: Resolved,
              factors: Sequence[float]) -> Optional[_Fit]:
    """A gradient: the port's = scale x the golden's + l2 x W (an L2 term l2/2 |W|^2 in the loss)."""
    w = f64(start)
    g, a = f64(g_value), f64(a_value)
    solution = lstsq([g, w], a)
    if solution is None:
        return None
    port = {"scale": float(solution[0]), "l2": float(solution[1])}
    found = smallest_change(["scale", "l2"], {"scale": 1.0, "l2": 0.0}, port,
                             lambda p: p["scale"] * g + p["l2"] * w, a_value, tol, {"scale": factors})
    return None if found is None else _Fit(key, *found)


def _fit_var(key: str, start: Any, g_value: Any, a_value: Any, tol: Resolved,
             moments: Optional[Tuple[np.ndarray, np.ndarray, Tuple[float, float]]],
             decays: Sequence[float], counts: Tuple[int, ...]) -> Optional[_Fit]:
    """A variable's update: Adam's form where its moments (adam.moments) are verified, else a
    scale and a decay; `decays`: the decay coefficients usual rates give at the step's learning
    rate; `counts`: the step counts a bias correction may have used (adam.counts)."""
    fits = None if moments is None else adam.adam_fits(start, g_value, a_value, moments[0], moments[1])
    betas = moments and moments[2]
    if fits is None:  # a factor or a decay still fits; verified betas still name a factor a bias correction
        plain = _fit_plain(key, start, g_value, a_value, tol, -1.0, adam.known_factors(betas, counts), decays)
        return None if plain is None else replace(plain, betas=betas, counts=counts)
    m, v = moments[0], moments[1]  # type: ignore[index]
    w = f64(start)
    g_move = f64(g_value) - w
    root = np.sqrt(np.maximum(v, 0.0))
    golden_fit = adam.snapped(fits[0], g_move, m, root, w, {"eps": EPSILONS, "decay": decays})
    port_fit = fits[1]
    # The golden's own Adam part, as it moved (its round-off kept), rescaled to other parameters.
    adam_part = g_move + golden_fit["decay"] * w

    def predict(p: Mapping[str, float]) -> np.ndarray:
        return w + adam_part * (p["alpha"] / golden_fit["alpha"]) * (root + golden_fit["eps"]) / (root + p["eps"]) - \
            p["decay"] * w
    factors = adam.known_factors(betas, counts)
    found = smallest_change(["alpha", "eps", "decay"], golden_fit, port_fit, predict, a_value, tol,
                             {"alpha": [golden_fit["alpha"] * f for f in factors], "eps": EPSILONS,
                              "decay": decays})
    if found is None:
        return None
    changed = found[0]
    # another epsilon, or a usual one added after the bias correction (corrected.py): the closer prediction
    if "eps" in changed and betas is not None:
        hat = corrected.epsilon_hat(golden_fit, predict, a_value, tol, betas[1], counts, EPSILONS)
        if hat is not None and (hat.ulps <= found[1] or abs(changed["eps"][1] / hat.acting - 1) < 0.05):
            return _Fit(key, {"eps_hat": (golden_fit["eps"], hat.eps)}, hat.ulps, betas, (hat.t,))
    if "alpha" in changed and "decay" in changed and same(*(a / g for g, a in (changed["alpha"], changed["decay"]))):
        # the whole step scaled, its decay with it: one factor of the learning rate
        changed = {"rate": (1.0, changed["alpha"][1] / changed["alpha"][0]),
                   **{k: v for k, v in changed.items() if k not in ("alpha", "decay")}}
    return _Fit(key, changed, found[1], betas, counts)


def _named(golden: Trace, step: int, fits: List[_Fit], found: List[Explained], trained: Set[str]) -> List[Fingerprint]:
    """The fits grouped by transformation (and its details in words: a permutation's order): one
    fingerprint each, listing its tensors, with the median of their parameters (a rate every
    variable shares is that rate); `trained`: the variables the golden's step has gradients of."""
    rate, batch = learning_rate(golden, step), batch_size(golden, step)
    explained = list(found)
    for fit in fits:
        for parameter, (g, a) in fit.changed.items():
            code, g_value, a_value, detail = _describe(parameter, g, a, fit, rate, batch)
            if code == LR_FACTOR and split_key(fit.key)[1] not in trained:  # no learning rate moves it
                code = AVERAGE_RATE
            explained.append(Explained(fit.key, code, g_value, a_value, fit.ulps, detail))
    groups: Dict[Tuple[Any, ...], List[Explained]] = {}
    for e in explained:
        words = tuple(sorted((k, v) for k, v in e.detail.items() if isinstance(v, str)))
        groups.setdefault((e.code,) + words, []).append(e)
    out = [Fingerprint(members[0].code, step, tuple(m.key for m in members),
                       float(np.median([m.golden for m in members])), float(np.median([m.port for m in members])),
                       max(m.ulps for m in members), members[0].detail) for members in groups.values()]
    return sorted(out, key=lambda f: (-len(f.keys), f.code))


def _none(decay: float, other: float) -> bool:
    """A fitted decay is none where it moves no value by an ulp of float32, or is a small
    fraction of the other side's: what a fit of few elements leaves of zero."""
    return abs(decay) <= EPS32 or abs(decay) <= ABSENT * abs(other)


def _nesterov_at_start(golden: Trace, found: Fingerprint, before: Mapping[str, Any],
                       recorded: Mapping[str, Any]) -> Fingerprint:
    """A learning-rate factor of 1 + mu on variables whose TF1 momentum accumulators start at this
    step (momentum.py): Nesterov's momentum moves so far there too; said in its detail."""
    mu = momentum.nesterov_at_start(found.port)
    if mu is None or not all(momentum.starts_accumulating(golden, split_key(key)[1], before, recorded)
                             for key in found.keys):
        return found
    return replace(found, detail=dict(found.detail, nesterov_mu=mu))


def _usual_times_rate(less: float, rate: Optional[float]) -> Optional[float]:
    """TF1's decay coefficient where the port decays `less` less a step than TF1 because its decay
    is TF1's times the learning rate (torch's AdamW for tf.contrib.opt's): less / (1 - rate), if
    that is a decay teams use (DECAYS); None otherwise."""
    if rate is None or not 0 < rate < 1:
        return None
    decay = less / (1.0 - rate)
    return next((d for d in DECAYS if same(d, decay)), None)


def _describe(parameter: str, g: float, a: float, fit: _Fit, rate: Optional[float], batch: Optional[int]) -> Tuple[str, float, float, Dict[str, float]]:
    """(code, golden's value, port's value, detail) of one changed parameter."""
    if parameter == "eps":
        return EPSILON, g, a, {}
    if parameter == "eps_hat":
        return corrected.EPSILON_HAT, g, a, {"t": float(fit.counts[0]), "beta_2": fit.betas[1]}  # type: ignore[index]
    if parameter in ("decay", "l2"):
        if parameter == "l2":
            return L2_IN_LOSS, g, a, {}
        detail = {} if rate is None else {"lr": rate}
        g_rate, a_rate = (g / rate, a / rate) if rate is not None else (g, a)
        if _none(g, a) and a < 0:  # the port decays less than TF1 (a plain fit: TF1's own decay is not known)
            usual = _usual_times_rate(-a, rate)
            if usual is not None:  # TF1's a usual decay, the port's it times the rate
                return DECAY_RATE, usual / rate, usual, dict(detail, times_lr=1.0)  # type: ignore[operator]
            return DECAY_MISSING, -a_rate, 0.0, detail
        if _none(g, a):
            return DECAY_ADDED, 0.0, a_rate, detail
        if _none(a, g):
            return DECAY_MISSING, g_rate, 0.0, detail
        if rate is not None and not same(rate, 1.0):  # one side's decay is the other's times the rate
            times = 1.0 if same(a, g * rate) else -1.0 if same(a, g / rate) else 0.0
            detail = dict(detail, times_lr=times) if times else detail
        return DECAY_RATE, g_rate, a_rate, detail
    factor = float(a / g if parameter in ("alpha", "rate") else a)  # the golden's scale is 1
    if fit.key.startswith("grad/"):
        by_batch = batch is not None and batch > 1 and (same(factor, batch) or same(factor, 1 / batch))
        return GRAD_SCALE, 1.0, factor, {"batch": float(batch)} if by_batch else {}
    if same(factor, -1.0):
        return SIGN, 1.0, -1.0, {}
    bias = adam.bias_step(factor, fit.betas, fit.counts)
    if bias is not None:
        t, corrects = bias
        return BIAS_CORRECTION, 0.0 if corrects else 1.0, 1.0 if corrects else 0.0, {
            "t": float(t), "factor": factor, "beta_1": fit.betas[0], "beta_2": fit.betas[1]}  # type: ignore[index]
    return LR_FACTOR, 1.0, factor, {}
