"""Perturbed starts: how far a model's training carries round-off, measured by replays whose
variables move a little (calibrate, and the drift envelope of tf2/verdict.py), in any framework.
Zeros stay: a zero-initialized bias is exactly zero in any port, and a subnormal would be an
infinite change relative to its scale; bfloat16 stays (no numpy ulp)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np


def move(variables: Sequence[Any], seed: int, read: Callable[[Any], np.ndarray], by_scale: bool = False) -> None:
    """Move every nonzero element of every float16/32/64 variable, at random (`seed`): one ulp
    up or down; by_scale: by up to one eps of its tensor's scale, uniformly, either way (another
    program's round-off is in proportion to the magnitudes it sums, not to each element).
    read(variable): its value as numpy; each variable's assign() takes the moved one."""
    rng = np.random.default_rng(seed)
    for variable in variables:
        value = read(variable)
        if value.dtype.kind != "f":
            continue
        if by_scale:
            scale = float(np.abs(value).max(initial=0.0)) * float(np.finfo(value.dtype).eps)
            moved = value + (rng.uniform(-1.0, 1.0, value.shape) * scale).astype(value.dtype)
        else:  # the direction in the value's own dtype: a float64 infinity would step in float64
            direction = np.where(rng.random(value.shape) < 0.5, -np.inf, np.inf).astype(value.dtype)
            moved = np.nextafter(value, direction)
        variable.assign(np.where(value == 0, value, moved))

