"""Distribution slips, recognized in a comparison of a replay under a tf.distribute strategy.

The replayer records where the replay ran (meta["replay"]["distribution"]: replicas,
devices, reduction, batch-norm layers that normalize per replica) and what it saw the
replicas do with their gradients. With that and the golden's values at the first
divergence, a comparison names the classic slips of a distributed port (as data;
report/ renders it):

- the loss averaged over each replica's batch instead of the global batch: the loss, or
  the gradients, are N times the golden's (tf.nn.compute_average_loss, global_batch_size);
- the regularization loss added whole on every replica: the loss exceeds the golden's by
  (N - 1) times its regularization loss (tf.nn.scale_regularization_loss);
- gradients all-reduced in the step and again by the optimizer, or not at all (each
  replica applies its own: the mirrored variables go apart);
- batch normalization over each replica's batch where TF1 normalized the global batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import numpy as np

from ..keys import REGULARIZATION, REPLICA
from ..store import Trace
from ..store.meta import replay_of

LOSS_PER_REPLICA = "loss-per-replica"
REGULARIZATION_UNSCALED = "regularization-unscaled"
REDUCED_TWICE = "gradients-reduced-twice"
NOT_REDUCED = "gradients-not-reduced"
BATCH_NORM = "batch-norm-per-replica"


@dataclass(frozen=True)
class DistributionHint:
    """`code` names the slip; `step` and `key` where it showed; `replicas` how many the
    replay ran; `factor` the measured ratio actual / golden (loss or gradient), `layers` the
    batch-norm layers concerned."""

    code: str
    step: int
    key: str
    replicas: int
    factor: Optional[float] = None
    layers: tuple = ()


def layout(actual_meta: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Where the replay ran (replicas, devices, reduction, input split), or None without a strategy."""
    replay = replay_of(actual_meta)
    found = replay.distribution if replay is not None else None
    return found if isinstance(found, dict) else None


def distribution_hints(golden: Trace, where: Optional[Dict[str, Any]], step: int, kind: str, key: str,
                       g: Any, a: Any) -> List[DistributionHint]:
    """The slips the first divergence (`step`, `kind`, `key`, where golden and actual hold `g`
    and `a`) looks like; `where`: the replay's layout(), None when it ran under no strategy."""
    if where is None or step < 0:
        return []
    replicas = int(where.get("replicas") or 1)
    hints = []
    for code, slip in ((REDUCED_TWICE, "reduced_twice"), (NOT_REDUCED, "not_reduced")):
        seen = (where.get("slips") or {}).get(slip)
        if isinstance(seen, dict) and int(seen.get("step", step)) <= step:
            hints.append(DistributionHint(code, int(seen["step"]), seen["tensors"][0], replicas))
    if REPLICA in key and not any(h.code == NOT_REDUCED for h in hints):
        hints.append(DistributionHint(NOT_REDUCED, step, key, replicas))
    if replicas > 1 and not hints and kind in ("loss", "grad"):
        factor = _factor(g, a)
        if factor is not None and abs(factor - replicas) <= 0.01 * replicas:
            hints.append(DistributionHint(LOSS_PER_REPLICA, step, key, replicas, factor))
        elif kind == "loss" and _regularization_unscaled(golden, step, g, a, replicas):
            hints.append(DistributionHint(REGULARIZATION_UNSCALED, step, key, replicas))
    layers = tuple(where.get("unsynchronized_batch_norm") or ())
    if replicas > 1 and layers and not hints:
        hints.append(DistributionHint(BATCH_NORM, step, key, replicas, layers=layers))
    return hints


def _factor(golden: Any, actual: Any) -> Optional[float]:
    """k where actual = k * golden to within 1% of the golden's size, else None."""
    g, a = np.asarray(golden, np.float64).ravel(), np.asarray(actual, np.float64).ravel()
    if g.shape != a.shape or not g.size or not np.all(np.isfinite(g)) or not np.all(np.isfinite(a)):
        return None
    norm = float(np.dot(g, g))
    if norm == 0.0:
        return None
    k = float(np.dot(a, g)) / norm
    return k if float(np.linalg.norm(a - k * g)) <= 0.01 * np.sqrt(norm) * max(1.0, abs(k)) else None


def _regularization_unscaled(golden: Trace, step: int, g: Any, a: Any, replicas: int) -> bool:
    """The loss exceeds the golden's by (replicas - 1) times the golden's regularization loss."""
    recorded = golden.step(step)
    if REGULARIZATION not in recorded or np.size(g) != 1:
        return False
    extra = (replicas - 1) * float(recorded[REGULARIZATION])
    excess = float(np.asarray(a, np.float64).ravel()[0]) - float(np.asarray(g, np.float64).ravel()[0])
    return extra != 0.0 and abs(excess - extra) <= 0.01 * abs(extra)
