"""The usual migration slips, recognized from the evidence at the first divergence.

Each check looks at the diverging tensor's two values and at what the golden recorded
around it, and fires only when the numbers fit the slip closely (a ratio or a difference
within RTOL), so round-off and other bugs do not trip it:

- a regularization loss left out or added twice: the loss differs by the golden's own
  regularization term (its "regularization" loss, or the sum of its per-variable ones);
- the loss summed instead of averaged (or the reverse): the loss is off by the batch size;
- a learning-rate schedule off by a step: the replay's rate is the golden's of the step
  before or after; where the recorder found the TF1 step reading its counter unordered with
  the counter's increment (a race, the golden's `races`), a learning rate that differs names
  the race instead: the golden's rate may be the next step's;
- batch-norm momentum: the moving statistics moved a constant fraction of the golden's
  move while the forward pass and the gradients agreed;
- random draws that differ: the replay did not take the golden's draws (random="none"),
  or the port's random op is not the one the tape feeds;
- an optimizer slot that starts elsewhere: the port's optimizer makes it with other initial
  values than the TF1 one did (Adagrad's initial_accumulator_value), seen in the initial
  state the replay read before it loaded the golden's;
- a step TF1 skipped: its gradients were not finite (a loss-scale optimizer's overflow) and it
  applied nothing, where the port's were finite and it applied them;
- an optimizer setting that differs: a variable (or its slot) diverges after its update, and
  the port's optimizer sets a hyperparameter (FTRL's l1, l2, shrinkage, learning-rate power,
  Adam's betas, RMSprop's rho, a momentum, an epsilon) to another value than the constant
  the TF1 update op read.

The results are data; report/ renders them with what to change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..errors import UsageError
from ..keys import INITIAL_STEP, counters_read, make_key, split_key
from ..store import Trace
from ..store.meta import replay_of
from ..store.raced import effect_of

REGULARIZATION_MISSING = "regularization-missing"
REGULARIZATION_DOUBLED = "regularization-doubled"
LOSS_SUMMED = "loss-summed"
LOSS_AVERAGED = "loss-averaged"
LR_SHIFTED = "lr-shifted"
BN_MOMENTUM = "batch-norm-momentum"
RANDOM_DRAWS = "random-draws"
SLOT_INITIAL = "slot-initial-value"
OPTIMIZER_SETTING = "optimizer-setting"
LR_RACE = "lr-race"
READ_RACE = "read-race"
ACCUMULATION = "accumulation"
MICRO_LOSSES = "micro-batch-losses"
SKIPPED_STEP = "skipped-step"

RTOL = 1e-3  # how closely the numbers must fit a slip, relative to the quantity they explain
BN_NAMES = ("moving_mean", "moving_variance")


@dataclass(frozen=True)
class SlipHint:
    """`code` names the slip; `step` and `key` where it showed; `evidence` the numbers that fit it."""

    code: str
    step: int
    key: str
    evidence: Dict[str, Any] = field(default_factory=dict)


def _scalar(value: Any) -> Optional[float]:
    array = np.asarray(value)
    if array.size != 1 or array.dtype.kind not in "fiu":
        return None
    number = float(array.reshape(()))
    return number if np.isfinite(number) else None


def _constant(value: Any) -> Optional[float]:
    """The one value every element of `value` holds, or None."""
    return _scalar(np.unique(np.asarray(value)))


def _close(a: float, b: float, scale: float) -> bool:
    return abs(a - b) <= RTOL * max(abs(scale), 1e-30)


def slip_hints(golden: Trace, step: int, key: str, g_value: Any, a_value: Any,
               agreed: Callable[[Sequence[str]], bool], actual_meta: Mapping[str, Any]) -> List[SlipHint]:
    """The slips the first divergence (`key` at `step`, the two values there) looks like;
    agreed(kinds) tells whether every tensor of those kinds compared at that step agreed."""
    kind, name = split_key(key)
    if step == INITIAL_STEP:
        start = _constant(a_value) if kind == "slot" else None  # what the port's optimizer made
        if start is None:
            return []
        slot = (golden.meta.get("slots") or {}).get(name)
        update = slot.get("update") if isinstance(slot, dict) else None
        return [SlipHint(SLOT_INITIAL, step, key, {"golden": _constant(g_value), "actual": start, "update": update})]
    found: Optional[SlipHint] = _accumulation(golden, step, key, actual_meta) or \
        _micro_losses(golden, step, key, g_value, a_value) or _skipped(golden, step, key, a_value, agreed)
    if found is not None:
        return [found]
    # A racy value the golden holds as fetched: the race may be the news. Recomputed from the state
    # the step started from, it is the value a port computes: the usual slips apply.
    race = _read_race(golden, key) if kind in ("loss", "tap", "grad") else None
    if race is not None and key in (golden.meta.get("recomputed") or {}):
        race = None
    if race is not None:
        # the TF1 step read a variable its own update changes, unordered: its value was the scheduler's pick
        found = SlipHint(READ_RACE, step, key, {"race": race, "golden": _scalar(g_value), "actual": _scalar(a_value),
                                                "effect": effect_of(golden.meta, key)})
    elif kind == "loss":
        found = _regularization(golden, step, key, g_value, a_value) or _reduction(golden, step, key, g_value, a_value)
    elif kind == "lr":
        found = _lr_shift(golden, step, key, a_value)
        race = next((r for r in golden.meta.get("races") or [] if isinstance(r, dict) and r.get("lr") == key), None)
        if race is not None and race.get("counter") in counters_read(golden.step(step).info):
            race = None  # the golden kept the value read, and the replay fed it: the port's rate is its own
        if race is not None:  # the golden's own rate is one of two: the race is the news, not the port
            found = SlipHint(LR_RACE, step, key, {"race": race, "golden": _scalar(g_value), "actual": _scalar(a_value),
                                                   "shift": found.evidence["shift"] if found is not None else None})
    elif kind == "var" and any(part in name for part in BN_NAMES):
        found = _bn_momentum(golden, step, key, g_value, a_value, agreed)
    elif kind == "random":
        replay = replay_of(actual_meta)
        mode = replay.random if replay is not None else None
        found = SlipHint(RANDOM_DRAWS, step, key, {"random": mode})
    if found is None and kind in ("var", "slot"):
        found = _setting(golden, step, key, actual_meta)
    return [] if found is None else [found]


def _accumulation(golden: Trace, step: int, key: str, actual_meta: Mapping[str, Any]) -> Optional[SlipHint]:
    """TF1's step applied the gradients of N micro-batch runs at once; the port's optimizer applied
    in each of its step's micro-batches (its apply_gradients called more than once in the step)."""
    micro = golden.step(step).info.get("micro_batches") if step >= 0 else None
    replay = replay_of(actual_meta)
    applies = replay.applies if replay is not None else None
    if not isinstance(micro, int) or micro < 2 or not isinstance(applies, int) or applies < 2:
        return None
    forms = (golden.meta.get("accumulation") or {}).get("form") or {}
    form = {f for f in forms.values() if f} if isinstance(forms, dict) else set()
    return SlipHint(ACCUMULATION, step, key, {"micro_batches": micro, "applies": applies,
                                              "form": form.pop() if len(form) == 1 else None})


def _micro_losses(golden: Trace, step: int, key: str, g_value: Any, a_value: Any) -> Optional[SlipHint]:
    """A step made of N micro-batch runs holds each one's loss; the port returned one value."""
    micro = golden.step(step).info.get("micro_batches") if step >= 0 else None
    if split_key(key)[0] != "loss" or not isinstance(micro, int) or np.shape(g_value) != (micro,) or \
            np.size(a_value) == micro:
        return None
    mean = float(np.mean(np.asarray(g_value, np.float64)))
    return SlipHint(MICRO_LOSSES, step, key, {"micro_batches": micro, "shape": list(np.shape(a_value)),
                                              "mean": mean, "actual": _scalar(a_value)})


def _skipped(golden: Trace, step: int, key: str, a_value: Any,
             agreed: Callable[[Sequence[str]], bool]) -> Optional[SlipHint]:
    """TF1's step held gradients that are not finite and left the variable where the step began
    (the audit's "not applied": a loss-scale optimizer skips such a step); the port's value is
    finite, and the port applied its update (its variables departed) or did not."""
    kind, name = split_key(key)
    if kind not in ("grad", "var", "slot") or step < 0:
        return None
    values = golden.step(step)
    grads = [k for k in values.keys() if split_key(k)[0] == "grad"]
    nonfinite = [k for k in grads if np.asarray(values[k]).dtype.kind == "f" and not np.all(np.isfinite(values[k]))]
    if not nonfinite or not np.all(np.isfinite(np.asarray(a_value, np.float64))):
        return None
    if kind in ("var", "slot"):
        try:
            before = golden.state_before(step).get(key)
        except UsageError:  # no whole state before the step (a digest golden): nothing to show it stood still
            return None
        if before is None or not np.array_equal(np.asarray(before), np.asarray(values[key])):
            return None
    scale = next((float(np.asarray(values[k]).reshape(-1)[0]) for k in values.keys()
                  if k.startswith("var/") and "loss_scale" in k and np.size(values[k]) == 1), None)
    return SlipHint(SKIPPED_STEP, step, key, {"nonfinite": len(nonfinite), "gradients": len(grads),
                                              "loss_scale": scale, "port_applied": not agreed(("var", "slot"))})


def _read_race(golden: Trace, key: str) -> Optional[Dict[str, Any]]:
    """The race the recorder found for a recorded tensor (a read its step's update may overtake)."""
    return next((r for r in golden.meta.get("races") or [] if isinstance(r, dict) and r.get("tensor") == key), None)


def _setting(golden: Trace, step: int, key: str, actual_meta: Mapping[str, Any]) -> Optional[SlipHint]:
    """The port's optimizer sets a hyperparameter of the diverging variable's update (or its
    slot's variable's) otherwise than the TF1 update op read it."""
    kind, name = split_key(key)
    if kind == "slot":
        slot = (golden.meta.get("slots") or {}).get(name)
        name = slot.get("var") if isinstance(slot, dict) else None
    recorded = (golden.meta.get("updates") or {}).get(name)
    replay = replay_of(actual_meta)
    port = (replay.optimizer_settings if replay is not None else {}).get(name)
    if not isinstance(recorded, dict) or not isinstance(port, dict):
        return None
    tf1, own = recorded.get("hyper") or {}, port.get("settings") or {}
    differ = [[arg, own[arg][0], tf1[arg], own[arg][1]] for arg in sorted(tf1)
              if arg in own and not np.isclose(float(tf1[arg]), float(own[arg][1]), rtol=1e-6, atol=0.0)]
    if not differ:
        return None
    return SlipHint(OPTIMIZER_SETTING, step, key, {"update": recorded.get("update"), "variable": name,
                                                   "optimizer": port.get("optimizer"), "differ": differ})


def _regularization(golden: Trace, step: int, key: str, g_value: Any, a_value: Any) -> Optional[SlipHint]:
    g, a = _scalar(g_value), _scalar(a_value)
    if g is None or a is None:
        return None
    values = golden.step(step)
    terms = {n: _scalar(values[make_key("loss", n)]) for n in golden.names("loss")
             if "regulariz" in n.lower() and make_key("loss", n) != key and make_key("loss", n) in values}
    terms = {n: v for n, v in terms.items() if v is not None and v != 0}
    if not terms:
        return None
    # One aggregate ("regularization") where the golden has it, else its per-variable terms summed.
    aggregate = [v for n, v in terms.items() if "/" not in n]
    total = aggregate[0] if len(aggregate) == 1 else sum(v for n, v in terms.items() if "/" in n)
    if _close(g - a, total, total):
        return SlipHint(REGULARIZATION_MISSING, step, key, {"golden": g, "actual": a, "regularization": total})
    if _close(a - g, total, total):
        return SlipHint(REGULARIZATION_DOUBLED, step, key, {"golden": g, "actual": a, "regularization": total})
    return None


def batch_size(golden: Trace, step: int) -> Optional[int]:
    """The step's batch size: the first dimension its inputs share."""
    values = golden.step(step)
    sizes = {np.asarray(values[make_key("input", n)]).shape[:1] for n in golden.names("input")
             if make_key("input", n) in values}
    sizes.discard(())
    return next(iter(sizes))[0] if len(sizes) == 1 else None


def learning_rate(golden: Trace, step: int) -> Optional[float]:
    """The golden's one learning rate at `step` (None: none, several, or zero)."""
    names = golden.names("lr")
    values = golden.step(step)
    key = make_key("lr", names[0]) if len(names) == 1 else None
    if key is None or key not in values:
        return None
    rate = float(np.asarray(values[key]).reshape(-1)[0])
    return rate if rate > 0 and np.isfinite(rate) else None


def _reduction(golden: Trace, step: int, key: str, g_value: Any, a_value: Any) -> Optional[SlipHint]:
    g, a = _scalar(g_value), _scalar(a_value)
    batch = batch_size(golden, step)
    if g is None or a is None or g == 0 or batch is None or batch < 2:
        return None
    evidence = {"golden": g, "actual": a, "batch": batch}
    if _close(a, g * batch, a):
        return SlipHint(LOSS_SUMMED, step, key, evidence)
    if _close(a * batch, g, g):
        return SlipHint(LOSS_AVERAGED, step, key, evidence)
    return None


def _lr_shift(golden: Trace, step: int, key: str, a_value: Any) -> Optional[SlipHint]:
    a = _scalar(a_value)
    if a is None:
        return None
    rates = {}
    for s in (step - 1, step, step + 1):
        if 0 <= s < len(golden):
            values = golden.step(s)
            rates[s] = _scalar(values[key]) if key in values else None
    here = rates.get(step)
    for shift in (1, -1):
        there = rates.get(step + shift)
        if there is not None and here is not None and there != here and _close(a, there, there):
            return SlipHint(LR_SHIFTED, step, key, {"shift": shift, "golden": here, "actual": a})
    return None


def _bn_momentum(golden: Trace, step: int, key: str, g_value: Any, a_value: Any,
                 agreed: Callable[[Sequence[str]], bool]) -> Optional[SlipHint]:
    """new = m * old + (1 - m) * batch statistic: with the same old value and the same batch
    (the forward pass agreed), (actual - old) / (golden - old) = (1 - m_actual) / (1 - m_golden)."""
    if not agreed(("tap", "loss", "grad")):
        return None
    before = golden.before(step)
    if before is None or key not in before:
        return None
    old = np.asarray(before[key], np.float64)
    g, a = np.asarray(g_value, np.float64), np.asarray(a_value, np.float64)
    if not (old.shape == g.shape == a.shape) or g.size == 0:
        return None
    moved = g - old
    use = np.abs(moved) > 1e-6 * max(float(np.abs(g).max()), 1e-30)
    if use.sum() < max(1, g.size // 2):
        return None
    ratios = (a - old)[use] / moved[use]
    ratio = float(np.median(ratios))
    # The same fraction for (nearly) every element: float32 round-off spreads the smallest moves a little.
    if ratio <= 0 or abs(ratio - 1) < 1e-2 or float(np.percentile(np.abs(ratios - ratio), 90)) > 1e-2 * ratio:
        return None
    return SlipHint(BN_MOMENTUM, step, key, {"ratio": ratio})
