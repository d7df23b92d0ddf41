"""Known optimizer-convention differences between TF1 and Keras, recognized in a comparison.

A port that uses the guide's optimizer mapping can still differ from TF1 on purpose of
Keras' design, not of a bug in the port's model. When the first divergence has the
fingerprint of such a difference, the comparison says so (as data; report/ renders it):

- MomentumOptimizer -> SGD(momentum=m): TF1 accumulates gradients (accum = m * accum + g;
  var -= lr * accum), Keras accumulates steps (v = m * v - lr * g; var += v). The two are the
  same while the learning rate is constant; they part at the first update after it changes.
- AdamOptimizer -> Adam: TF1's epsilon defaults to 1e-8, Keras' to 1e-7, and enters only
  the update: the gradients and Adam's m and v agree, the updated variables do not.
- RMSPropOptimizer -> RMSprop: the same with TF1's 1e-10 against Keras' 1e-7 (TF1 also adds
  epsilon inside the square root, Keras outside).
- A sparse gradient (an embedding's rows) with an index looked up twice: TF1's optimizers (and
  tf-keras') sum the rows of an index before the update; Keras 3's apply a function of each row
  (Adam's square) before summing them, so only the rows of repeated indices differ
  (tools/keras_sparse.py measures Adam, Adagrad and Adadelta so).
- A sparse gradient given to an optimizer that densifies it (both Kerases' Ftrl): rows that no
  index names are updated as with a zero gradient, where TF1's sparse update leaves them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, FrozenSet, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..keys import make_key, split_key
from ..store import Trace
from .sparse import SparseRows

MOMENTUM = "momentum-convention"
ADAM_EPSILON = "adam-epsilon"
RMSPROP_EPSILON = "rmsprop-epsilon"
SPARSE_ROWS = "sparse-repeated-rows"
SPARSE_UNNAMED = "sparse-unnamed-rows"


@dataclass(frozen=True)
class ConventionHint:
    """`code` names the difference; `step` and `key` where it showed; `lr_change` the golden's
    learning rate before and at the step where it first changed (momentum only)."""

    code: str
    step: int
    key: str
    lr_change: Optional[Tuple[int, float, float]] = None  # (step, lr before, lr at that step)
    # Adam: the epsilon the replay's update fits, taking TF1's default (TF1_ADAM_EPSILON) for the golden's.
    fitted_epsilon: Optional[float] = None
    # sparse rows: (rows that differ, of them rows whose index repeats, rows whose index repeats)
    rows: Optional[Tuple[int, int, int]] = None


TF1_ADAM_EPSILON = 1e-8


def convention_hints(golden: Trace, step: int, kind: str, key: str,
                     agreed: Callable[[Sequence[str]], bool], g_value: Any = None,
                     a_value: Any = None, rows: Optional[Mapping[str, SparseRows]] = None) -> List[ConventionHint]:
    """The known differences the first divergence (`step`, `kind`, `key`, its two values)
    looks like; agreed(kinds) tells whether every tensor of those kinds compared at that
    step agreed; `rows`: {variable: the rows of its sparse gradient at that step}."""
    if kind not in ("var", "slot") or step < 0:
        return []
    slots = set(golden.names("slot"))
    name = key.partition("/")[2]
    base = name[:-2] if name.endswith(":0") else name

    def optimized_by(suffix: str) -> bool:  # the diverging tensor is this optimizer's variable or slot
        return base + "/%s:0" % suffix in slots if kind == "var" else name.endswith("/%s:0" % suffix)

    hints = []
    sparse = (rows or {}).get(variable_of(golden, key) or "")
    if sparse is not None and agreed(("grad", "lr")):
        for code, which in ((SPARSE_ROWS, sparse.repeated), (SPARSE_UNNAMED, None)):
            if which is None:  # the rows no index names
                which = frozenset(range(np.shape(g_value)[0])) - sparse.named if np.ndim(g_value) else frozenset()
            found = _only_rows(g_value, a_value, which)
            if found is not None:
                hints.append(ConventionHint(code, step, key, rows=found))
                return hints  # the epsilon's fingerprint (only the update differs) is this one's too
    if step >= 1 and optimized_by("Momentum"):
        change = _first_lr_change(golden, step)
        if change is not None:
            hints.append(ConventionHint(MOMENTUM, step, key, change))
    if kind == "var" and optimized_by("Adam") and agreed(("grad", "lr", "slot")):
        hints.append(ConventionHint(ADAM_EPSILON, step, key,
                                    fitted_epsilon=_fitted_epsilon(golden, step, key, base, g_value, a_value)))
    if kind == "var" and optimized_by("RMSProp") and agreed(("grad", "lr", "slot")):
        hints.append(ConventionHint(RMSPROP_EPSILON, step, key))
    return hints


def variable_of(golden: Trace, key: str) -> Optional[str]:
    """The golden variable a "var/", "slot/" or "grad/" key belongs to."""
    try:
        kind, name = split_key(key)
    except KeyError:
        return None
    if kind == "slot":
        slot = (golden.meta.get("slots") or {}).get(name)
        return slot.get("var") if isinstance(slot, dict) else None
    return name if kind in ("var", "grad") else None


def _only_rows(g_value: Any, a_value: Any, rows: FrozenSet[int]) -> Optional[Tuple[int, int, int]]:
    """Where the rows that differ clearly (by more than 1e-3 of the largest difference) are all
    among `rows`, and make up at least half of them: (rows that differ, of them in `rows`, rows).
    None otherwise."""
    if not rows or g_value is None or a_value is None:
        return None
    g, a = np.asarray(g_value, np.float64), np.asarray(a_value, np.float64)
    if g.shape != a.shape or g.ndim < 1:
        return None
    diff = np.abs(g - a).reshape(g.shape[0], -1).max(axis=1)
    worst = float(diff.max()) if diff.size else 0.0
    if not worst > 0:
        return None
    differing = set(int(r) for r in np.nonzero(diff > 1e-3 * worst)[0])
    if not differing <= rows or 2 * len(differing) < len(rows):
        return None
    return len(differing), len(rows & differing), len(rows)


def _first_lr_change(golden: Trace, until: int) -> Optional[Tuple[int, float, float]]:
    """The first step at or before `until` whose learning rate differs from the step before."""
    names = golden.names("lr")
    if len(names) != 1:
        return None
    previous = None
    for step in range(until + 1):
        value = golden.step(step).get(("lr", names[0]))
        if value is None:
            continue
        value = float(value)
        if previous is not None and value != previous:
            return (step, previous, value)
        previous = value
    return None


def _fitted_epsilon(golden: Trace, step: int, key: str, base: str, g_value: Any, a_value: Any) -> Optional[float]:
    """The epsilon the replay's Adam update fits. Both updates are alpha * m / (sqrt(v) + eps)
    with the same alpha, m and v (they agreed), so for each element
    golden_move * (sqrt(v) + eps_golden) = replay_move * (sqrt(v) + eps_replay); with TF1's
    default for eps_golden, the median of the elements' eps_replay (None: the elements do not
    agree on one, within a factor of 2 for 80% of them)."""
    before = golden.before(step)
    if g_value is None or a_value is None or before is None:
        return None
    v_key = make_key("slot", base + "/Adam_1:0")
    values = golden.step(step)
    if key not in before or v_key not in values:
        return None
    old = np.asarray(before[key], np.float64)
    g_move = np.asarray(g_value, np.float64) - old
    a_move = np.asarray(a_value, np.float64) - old
    root = np.sqrt(np.asarray(values[v_key], np.float64))
    if not (old.shape == g_move.shape == a_move.shape == root.shape):
        return None
    use = np.abs(a_move) > 1e-6 * max(float(np.abs(old).max()), 1e-30)
    if use.sum() < 3:
        return None
    fits = (g_move * (root + TF1_ADAM_EPSILON) - a_move * root)[use] / a_move[use]
    fitted = float(np.median(fits))
    low, high = np.percentile(fits, [10, 90])
    # One epsilon explains (nearly) every element only if their fits agree: else say nothing.
    if not (fitted > 0 and np.isfinite(fitted) and fitted / 2 <= low and high <= 2 * fitted):
        return None
    return fitted
