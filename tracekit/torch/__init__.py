"""tracekit for PyTorch ports: `tracekit.torch.replay(golden, step_fn, model=, optimizer=)` and
`check`. Imports PyTorch.

    drive.py   replay(), check(), localize(), calibrate(): the runner driven by the framework-free loop
    runner.py  the runner (replay/loop.py's Runner) of a torch.nn.Module and its optimizers
    params.py  parameters and buffers under TF's names and in TF's layout
    optim.py   the optimizer's gradients, learning rate and state, by role
    fresh.py   the optimizer's state made before its first update (torch's lazily made, a dry step)
    tape.py    the golden's random draws fed to dropout and torch.rand/randn
    conversions.py  TF1 cells' weights in torch's recurrent modules (lstm)
    arbiter.py the float64 arbiter's one-step replay (model.double())
"""

from __future__ import annotations

from ..replay.conversions import transpose
from .conversions import lstm
from .drive import calibrate, check, localize, replay, torch_environment

__all__ = ["calibrate", "check", "localize", "lstm", "replay", "torch_environment", "transpose"]
