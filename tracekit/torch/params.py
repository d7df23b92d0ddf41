"""A PyTorch module's parameters and buffers in the golden's terms.

Each is offered for pairing under the name TF would give its role (`hidden.weight` of an
nn.Linear is `hidden/kernel`, a BatchNorm's `running_var` is `bn/moving_variance`) and in TF's
layout (Linear's `(out, in)` weight seen as Dense's `(in, out)` kernel, a convolution's `OIHW`
as `HWIO`), so the engine's pairing (replay/variables.py) and comparison never see torch's own
conventions. The layout is an axis permutation, so values, gradients and optimizer state
convert alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

# Buffers that are a module's own bookkeeping, with no TF1 counterpart (BatchNorm counts its batches).
OWN_BUFFERS = frozenset({"num_batches_tracked"})

_NORMS = (torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm, torch.nn.GroupNorm)
_NORM_ROLES = {"weight": "gamma", "bias": "beta", "running_mean": "moving_mean", "running_var": "moving_variance"}
_CONVS = (torch.nn.modules.conv._ConvNd,)


def _role(module: Any, attribute: str, ndim: int) -> Tuple[str, Optional[Tuple[int, ...]]]:
    """TF's name for `module`'s `attribute` and the permutation from torch's axes to TF's."""
    if isinstance(module, torch.nn.Linear) and attribute == "weight":
        return "kernel", (1, 0)
    if isinstance(module, _CONVS) and attribute == "weight":  # (O, I, *spatial) -> (*spatial, I, O)
        return "kernel", tuple(range(2, ndim)) + (1, 0)
    if isinstance(module, _NORMS):
        return _NORM_ROLES.get(attribute, attribute), None
    if isinstance(module, torch.nn.Embedding) and attribute == "weight":
        return "embeddings", None
    return attribute, None


@dataclass(eq=False)
class Param:
    """One parameter or buffer as the golden sees it: `name` TF's (for pairing), `dotted`
    torch's, `perm` torch's axes -> the golden's (None: the same)."""

    name: str
    dotted: str
    tensor: torch.Tensor
    perm: Optional[Tuple[int, ...]] = None

    framework = "PyTorch"  # what messages call the port's variables (replay/variables.py)

    @property
    def shown(self) -> str:
        """torch's name, and TF's where pairing uses another: `hidden.weight (hidden/kernel, transposed)`."""
        if self.name == self.dotted:
            return self.dotted
        return "%s (as %s%s)" % (self.dotted, self.name, ", transposed" if self.perm else "")

    @property
    def shape(self) -> Tuple[int, ...]:
        shape = tuple(self.tensor.shape)
        return tuple(shape[i] for i in self.perm) if self.perm else shape

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.tensor.dtype)

    def to_golden(self, value: torch.Tensor) -> np.ndarray:
        """A tensor of this parameter's shape (itself, its gradient, a slot) as the golden holds it."""
        array = value.detach().cpu().numpy()
        return np.array(array.transpose(self.perm), order="C") if self.perm else array.copy()

    def to_port(self, value: Any, like: Optional[torch.Tensor] = None) -> torch.Tensor:
        """A golden value as a tensor of this parameter's layout (and `like`'s dtype and device)."""
        like = self.tensor if like is None else like
        array = np.asarray(value)
        if self.perm:
            array = array.transpose(np.argsort(self.perm))
        # np.array, not ascontiguousarray: that makes a scalar (a step counter) one-dimensional
        return torch.from_numpy(np.array(array, dtype=numpy_dtype(like.dtype), order="C")).to(like.device)

    def assign(self, value: Any) -> None:
        with torch.no_grad():
            self.tensor.copy_(self.to_port(value))

    def numpy(self) -> np.ndarray:
        return self.to_golden(self.tensor)


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty((), dtype=dtype).numpy().dtype


def module_params(model: Any) -> List[Param]:
    """Every parameter and buffer of `model`, in TF's terms (OWN_BUFFERS left out)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError("model must be a torch.nn.Module, got %s" % type(model).__name__)
    found: List[Param] = []
    seen: set = set()
    for path, module in model.named_modules():
        own = list(module.named_parameters(recurse=False)) + list(module.named_buffers(recurse=False))
        for attribute, tensor in own:
            if tensor is None or id(tensor) in seen or attribute in OWN_BUFFERS:
                continue
            seen.add(id(tensor))
            role, perm = _role(module, attribute, tensor.dim())
            dotted = "%s.%s" % (path, attribute) if path else attribute
            found.append(Param("/".join(path.split(".") + [role]) if path else role, dotted, tensor, perm))
    return found


def by_tensor(params: List[Param]) -> Dict[int, Param]:
    """id(torch tensor) -> its Param."""
    return {id(p.tensor): p for p in params}
