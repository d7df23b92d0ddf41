"""Synthetic goldens for the lifecycle tests: a legacy-like recording and TF2-run traces
(replays) of it, with the metadata each carries. No TensorFlow; Python 3.7 syntax."""

from __future__ import annotations

import numpy as np

from . import build_golden

LEGACY_META = {
    "user": {"model": "toy"},
    "train_ops": ["GradientDescent"],
    "slots": {},
    "program": {"entry": "train.py", "sha256": "ab" * 32},
    "environment": {"python": "3.7.16", "tensorflow": "1.15.5", "cpu": "Legacy CPU", "cpu_isa": ["avx2", "fma"]},
    "tensorflow": {"version": "1.15.5"},
    "recording": {"every": 1, "steps_limit": None},
}


def step_values(n, scale=1.0):
    """The toy training's `n` steps, {"kind/name": value} each, derived from the step index."""
    for k in range(n):
        rng = np.random.RandomState(k)
        yield {"input/x:0": rng.randn(4, 3).astype(np.float32),
               "loss/loss": np.float32(1.0 / (k + 1)),
               "lr/learning_rate": np.float32(0.1),
               "grad/w:0": (rng.randn(3, 2) * scale).astype(np.float32),
               "var/w:0": (rng.randn(3, 2) + k).astype(np.float32)}


def legacy_golden(path, steps=4):
    """A golden as the legacy recorder leaves it (no provenance key: an older recording)."""
    return build_golden(path, step_values(steps), {"var/w:0": np.zeros((3, 2), np.float32)},
                        meta=dict(LEGACY_META), info=lambda k: {"global_step": k + 1, "train_ops": ["GradientDescent"]})


def replayed(path, steps=4, change=None, limited=False, program="port.py"):
    """A TF2 run's trace of legacy_golden: the same data unless `change(k, key, value)` moves it."""
    meta = {"replay": {"golden": "g.h5", "steps": steps, "limited": limited, "not_replayed": {}},
            "tensorflow": {"version": "2.21.0"}, "program": {"entry": program, "sha256": "cd" * 32},
            "environment": {"python": "3.11.7", "tensorflow": "2.21.0", "cpu": "Modern CPU", "cpu_isa": ["avx512f"]}}
    return build_golden(path, step_values(steps), {"var/w:0": np.zeros((3, 2), np.float32)}, meta=meta,
                        info=lambda k: {"golden_step": k}, change=change)


def bump(step, key, by=1e-3):
    """A change(k, key, value) that moves `key` from `step` on."""
    return lambda k, name, value: (value + np.float32(by)).astype(value.dtype) if name == key and k >= step else value
