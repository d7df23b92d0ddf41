"""The golden's random draws fed to a PyTorch port, in the order it draws them (the draws
themselves: replay/draws.py).

torch's dropout draws inside one fused kernel, with no draw to replace, so for the step's length
`torch.nn.functional.dropout` (which `nn.Dropout` calls) is one that takes its uniform draw from
the tape and masks as TF1 did; `torch.nn.functional.scaled_dot_product_attention` with a
`dropout_p` (what attention modules call, nn.MultiheadAttention among them) is computed step by
step, as TF1's attention is written, its dropout that one; `torch.rand`, `torch.rand_like`,
`torch.randn` and `torch.randn_like` hand out the tape's draws as they are.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, Iterator, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from ..replay.draws import DrawTape, kept as kept_where
from ..replay.patched import patched
from .params import numpy_dtype


class Tape(DrawTape):
    """One replay's random tape; `inject` False leaves torch's randomness alone."""

    def __init__(self, inject: bool) -> None:
        super().__init__(inject, "PyTorch", "dropout through torch.nn.functional.dropout, nn.Dropout or "
                         "scaled_dot_product_attention's dropout_p, other draws through torch.rand/randn", "dropout2d, alpha_dropout, bernoulli and Tensor.uniform_")

    def _next(self, what: str, shape: Tuple[int, ...], dtype: torch.dtype, kind: str,
              rate: Optional[float] = None) -> torch.Tensor:
        return torch.from_numpy(np.array(self.next(what, shape, kind, rate), dtype=numpy_dtype(dtype)))

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
            uniform = tape.next("dropout", tuple(input.shape), "uniform", float(p))
            kept = torch.from_numpy(kept_where(uniform, p)).to(device=input.device, dtype=input.dtype)
            out = input * (1.0 / (1.0 - p)) * kept
            return input.copy_(out) if inplace else out

        def attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: Any = None,
                      dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None,
                      enable_gqa: bool = False) -> torch.Tensor:
            if not dropout_p:  # nothing drawn: torch's own kernel
                return original_attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale,
                                          enable_gqa=enable_gqa)
            if enable_gqa and key.size(-3) != query.size(-3):  # grouped heads: each key/value head serves several
                key = key.repeat_interleave(query.size(-3) // key.size(-3), -3)
                value = value.repeat_interleave(query.size(-3) // value.size(-3), -3)
            scores = query @ key.transpose(-2, -1) * (1.0 / math.sqrt(query.size(-1)) if scale is None else scale)
            if is_causal:
                causal = torch.ones(query.size(-2), key.size(-2), dtype=torch.bool, device=query.device).tril()
                scores = scores.masked_fill(~causal, float("-inf"))
            if attn_mask is not None:
                scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
                    else scores + attn_mask
            return dropout(torch.softmax(scores, dim=-1), dropout_p) @ value

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
        original_attention = F.scaled_dot_product_attention
        replaced.append((F, "dropout", dropout))
        replaced.append((F, "scaled_dot_product_attention", attention))
        for fname, kind, like in (("rand", "uniform", False), ("rand_like", "uniform", True),
                                  ("randn", "normal", False), ("randn_like", "normal", True)):
            replaced.append((torch, fname, drawing(kind, "torch." + fname, like)))
        with patched(replaced):
            yield

