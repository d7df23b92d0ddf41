"""What a golden says of the gradients a race in its TF1 run moved.

A gradient whose computation reads a variable the same run's update changes, with nothing
ordering the read before the update (tf.gradients ungated, gradient checkpointing's copies of the
forward pass ordered only after the loss), may be taken from a variable the step already moved.
The golden keeps the gradient as the update read it (the audit holds the update to it), and the
recorder recomputes it from the state the step started from to measure how far the race moved
it: meta["race_effects"], "grad/..." -> {"effect": max |recorded - recomputed| over max
|recomputed|, "step": where}. No port reproduces a race; a small one a tolerance rule can absorb,
a large one only recording again with the updates ordered after every gradient. Python 3.7
syntax, no numpy."""

from __future__ import annotations

from typing import Any, List, Mapping, Tuple

from ..keys import RACE_EFFECTS

ABSORBED = 1e-3  # a race that moved a gradient by less than this share of its size: a tolerance rule absorbs it
FIX = ("record again with the updates ordered after every gradient: `with tf.control_dependencies(grads): "
       "train_op = optimizer.apply_gradients(zip(grads, variables))`, or minimize(..., "
       "gate_gradients=tf.compat.v1.train.Optimizer.GATE_GRAPH)")


def race_effects(meta: Mapping[str, Any]) -> List[Tuple[str, float, int]]:
    """(gradient key, how far its race moved it, the step), the largest first."""
    stored = meta.get(RACE_EFFECTS)
    out = [(str(key), float(e["effect"]), int(e.get("step", 0))) for key, e in (stored or {}).items()
           if isinstance(e, Mapping) and isinstance(e.get("effect"), (int, float))] if isinstance(stored, Mapping) else []
    return sorted(out, key=lambda item: -item[1])


def raced(meta: Mapping[str, Any]) -> List[str]:
    """A line on the gradients races moved, and what absorbs it ([] where none was measured)."""
    effects = race_effects(meta)
    if not effects:
        return []
    key, effect, step = effects[0]
    if effect <= ABSORBED:
        return ["races moved %d gradient(s) by at most %.2g of their size (%s at step %d): within what a tolerance "
                "rule on them can absorb" % (len(effects), effect, key, step)]
    return ["races in the TF1 run moved %d gradient(s) by up to %.3g of their size (%s at step %d): no port "
            "reproduces that, and no tolerance absorbs it; %s" % (len(effects), effect, key, step, FIX)]


def effect_of(meta: Mapping[str, Any], key: str) -> "float | None":
    """How far races moved the gradient `key` (None: not measured)."""
    return next((effect for k, effect, _ in race_effects(meta) if k == key), None)
