"""tracekit for JAX ports (flax with optax): `tracekit.jax.replay(golden, step_fn, state=)` and
`check`. Imports JAX.

    drive.py   replay(), check(), localize(), calibrate(): the runner driven by the framework-free loop
    runner.py  the runner (replay/loop.py's Runner) of a train state and its functional step
    tree.py    the train state as assignable leaves, the model's under TF's names
    nnx.py     a flax NNX module and optimizer as the state and functional step the replay drives
    optim.py   the optax state by role, the gradients tx is handed, the learning rate
    tape.py    the golden's random draws fed to jax.random (flax's Dropout among its callers)
    conversions.py  TF1 cells' weights in flax's LSTM cells (lstm)
    arbiter.py the float64 arbiter's one-step replay (the state cast up under jax_enable_x64)
"""

from __future__ import annotations

from ..replay.conversions import transpose
from .conversions import lstm
from .drive import calibrate, check, jax_environment, localize, replay
from .nnx import nnx_port

__all__ = ["calibrate", "check", "jax_environment", "localize", "lstm", "nnx_port", "replay", "transpose"]
