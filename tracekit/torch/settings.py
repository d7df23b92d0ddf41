"""Settings of a PyTorch port's own modules that ports commonly get the other way, offered to the
replay of a failing step (judge/variants.py): each is applied to the modules in place, the step
replayed, and put back.

- A BatchNorm's epsilon: TF1's Keras and tf.layers add 1e-3 to the variance, torch's BatchNorm
  1e-5 by default (Keras' ResNets 1.001e-5). Where the golden has no tap of the layer, the loss
  departs first and no fit of the numbers names it.
"""

from __future__ import annotations

from typing import Any, Callable, List

import torch

from ..judge.variants import Setting

BN_EPSILON = "batch-norm-epsilon"
BN_EPSILONS = (1e-3, 1e-5, 1.001e-5)  # TF1's Keras and tf.layers, torch's and flax's, Keras' ResNets


def settings(model: Any) -> List[Setting]:
    """The settings of `model`'s modules to try the other way (none for a model that is not an
    nn.Module)."""
    if not isinstance(model, torch.nn.Module):
        return []
    norms = [(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return []
    where = "BatchNorm module%s %s" % ("" if len(norms) == 1 else "s", ", ".join(name for name, _ in norms))
    now = sorted({float(m.eps) for _, m in norms})
    return [Setting(BN_EPSILON, where, "adds eps=%s to the variance" % ", ".join("%g" % e for e in now),
                    "adds eps=%g" % eps, _setter([m for _, m in norms], eps))
            for eps in BN_EPSILONS if now != [eps]]


def _setter(modules: List[Any], eps: float) -> Callable[[], Callable[[], None]]:
    def apply() -> Callable[[], None]:
        before = [m.eps for m in modules]
        for m in modules:
            m.eps = eps

        def undo() -> None:
            for m, value in zip(modules, before):
                m.eps = value
        return undo
    return apply
