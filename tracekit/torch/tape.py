"""The golden's random draws fed to a PyTorch port, in the order it draws them.

TF1 drops out with a uniform draw: an element is kept where the draw is >= the rate, and
scaled by 1 / (1 - rate). torch's dropout draws inside one fused kernel, with no draw to
replace, so for the step's length `torch.nn.functional.dropout` (which `nn.Dropout` calls) is
one that takes its uniform draw from the tape and masks as TF1 did; `torch.rand`,
`torch.rand_like`, `torch.randn` and `torch.randn_like` hand out the tape's draws as they are.
A draw of another shape with as many numbers is fed reshaped; anything else is an error naming
the step and the draw.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import ReplayError
from .params import numpy_dtype


class Tape:
    """One replay's random tape; `inject` False leaves torch's randomness alone."""

    def __init__(self, inject: bool) -> None:
        self.inject = inject
        self.taken: List[np.ndarray] = []  # this step's draws as the port took them
        self.rates: Dict[str, float] = {}  # golden draw -> the dropout rate it was used at
        self.reshaped: Dict[str, List[List[int]]] = {}
        self._tape: List[Tuple[str, np.ndarray]] = []
        self._step = -1

    def start(self, index: int, draws: List[Tuple[str, np.ndarray]]) -> None:
        self._tape, self.taken, self._step = list(draws), [], index

    def check(self, index: int) -> None:
        """After the step: the port must have drawn every recorded draw."""
        if self.inject and self._tape and len(self.taken) != len(self._tape):
            raise ReplayError("step %d: the PyTorch step drew %d random tensors, the golden recorded %d (%s); the "
                              "random tape feeds them in order, so the port must draw as often (dropout through "
                              "torch.nn.functional.dropout or nn.Dropout, other draws through torch.rand/randn; "
                              "dropout2d, alpha_dropout, attention's dropout_p, bernoulli and Tensor.uniform_ draw "
                              "their own, unfed)"
                              % (index, len(self.taken), len(self._tape), ", ".join(n for n, _ in self._tape)))

    def _next(self, what: str, shape: Tuple[int, ...], dtype: torch.dtype, kind: str,
              rate: Optional[float] = None) -> torch.Tensor:
        position = len(self.taken)
        where = "step %d, random draw %d (%s)" % (self._step, position, what)
        if position >= len(self._tape):
            raise ReplayError("%s: the PyTorch step draws more random tensors than the golden recorded (%d); use "
                              "random='none' if the port's randomness differs" % (where, len(self._tape)))
        name, value = self._tape[position]
        drawn = _distribution(name)
        if drawn is not None and drawn != kind:
            raise ReplayError("%s: the golden recorded a %s draw (%s), the PyTorch step asks for a %s one; the tape "
                              "feeds draws in order" % (where, drawn, name, kind))
        if tuple(value.shape) != shape and value.size == int(np.prod(shape)):
            self.reshaped.setdefault(name, [list(value.shape), list(shape)])
            value = value.reshape(shape)
        if tuple(value.shape) != shape:
            raise ReplayError("%s: the golden recorded %s %s from %s, the PyTorch step asks for %s; the tape feeds "
                              "draws in order, so the port must draw as many numbers in the same order"
                              % (where, value.dtype, tuple(value.shape), name, shape))
        self.taken.append(value)
        if rate is not None:
            self.rates.setdefault(name, rate)
        return torch.from_numpy(np.array(value, dtype=numpy_dtype(dtype)))

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if not self.inject:
            yield
            return
        tape = self
        replaced: List[Tuple[Any, str, Callable[..., Any]]] = []

        def dropout(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor:
            if not training or p == 0:
                return input
            uniform = tape._next("dropout", tuple(input.shape), input.dtype, "uniform", float(p)).to(input.device)
            kept = (uniform >= p).to(input.dtype)  # TF1: keep where the uniform draw >= rate, scale the kept
            out = input * (1.0 / (1.0 - p)) * kept
            return input.copy_(out) if inplace else out

        def drawing(kind: str, fname: str, like: bool) -> Callable[..., torch.Tensor]:
            def draw(*args: Any, **kwargs: Any) -> torch.Tensor:
                if like:
                    shape, dtype, device = tuple(args[0].shape), kwargs.get("dtype") or args[0].dtype, args[0].device
                else:
                    shape = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)) \
                        else tuple(int(a) for a in args)
                    shape = tuple(kwargs.get("size", shape))
                    dtype, device = kwargs.get("dtype") or torch.get_default_dtype(), kwargs.get("device") or "cpu"
                return tape._next(fname, shape, dtype, kind).to(device)
            return draw
        replaced.append((F, "dropout", dropout))
        for fname, kind, like in (("rand", "uniform", False), ("rand_like", "uniform", True),
                                  ("randn", "normal", False), ("randn_like", "normal", True)):
            replaced.append((torch, fname, drawing(kind, "torch." + fname, like)))
        saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in replaced]
        for owner, attr, function in replaced:
            setattr(owner, attr, function)
        try:
            yield
        finally:
            for owner, attr, function in saved:
                setattr(owner, attr, function)


def _distribution(name: str) -> Optional[str]:
    lowered = name.rsplit("/", 1)[-1].lower()
    for kind in ("truncated", "normal", "uniform"):  # truncated first: its name holds "normal" too
        if kind in lowered:
            return kind
    return None
