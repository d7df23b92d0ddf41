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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

from ..store import Trace

MOMENTUM = "momentum-convention"
ADAM_EPSILON = "adam-epsilon"
RMSPROP_EPSILON = "rmsprop-epsilon"


@dataclass(frozen=True)
class ConventionHint:
    """`code` names the difference; `step` and `key` where it showed; `lr_change` the golden's
    learning rate before and at the step where it first changed (momentum only)."""

    code: str
    step: int
    key: str
    lr_change: Optional[Tuple[int, float, float]] = None  # (step, lr before, lr at that step)


def convention_hints(golden: Trace, step: int, kind: str, key: str,
                     agreed: Callable[[Sequence[str]], bool]) -> List[ConventionHint]:
    """The known differences the first divergence (`step`, `kind`, `key`) looks like;
    agreed(kinds) tells whether every tensor of those kinds compared at that step agreed."""
    if kind not in ("var", "slot") or step < 0:
        return []
    slots = set(golden.names("slot"))
    name = key.partition("/")[2]
    base = name[:-2] if name.endswith(":0") else name

    def optimized_by(suffix: str) -> bool:  # the diverging tensor is this optimizer's variable or slot
        return base + "/%s:0" % suffix in slots if kind == "var" else name.endswith("/%s:0" % suffix)

    hints = []
    if step >= 1 and optimized_by("Momentum"):
        change = _first_lr_change(golden, step)
        if change is not None:
            hints.append(ConventionHint(MOMENTUM, step, key, change))
    if kind == "var" and optimized_by("Adam") and agreed(("grad", "lr", "slot")):
        hints.append(ConventionHint(ADAM_EPSILON, step, key))
    if kind == "var" and optimized_by("RMSProp") and agreed(("grad", "lr", "slot")):
        hints.append(ConventionHint(RMSPROP_EPSILON, step, key))
    return hints


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
