"""A port's factory (make_port): a fresh (model, step function) per call, or (model, step
function, {replay option: value}) for options that name the port's own objects (convert=,
variables=). localize, calibrate and the verdict on long goldens call it for every replay."""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, Mapping, Tuple

from ..errors import UsageError


def made(make_port: Callable[[], Any]) -> Tuple[Any, Any, Dict[str, Any]]:
    """(model, step function, its replay options) of a fresh port."""
    port = make_port()
    if not isinstance(port, tuple) or len(port) not in (2, 3) or (len(port) == 3 and not isinstance(port[2], Mapping)):
        got = "a tuple of %d" % len(port) if isinstance(port, tuple) else type(port).__name__
        raise UsageError("make_port() must return (model, step function) or (model, step function, {replay option: "
                         "value}), got %s" % got)
    return port[0], port[1], dict(port[2]) if len(port) == 3 else {}


def framework_of_model(model: Any, optimizer: Any = None) -> str:
    """Which framework a port's model is of, by what is already imported (none is imported
    here): "torch" for a torch.nn.Module (or where a PyTorch optimizer is given), "jax" for a
    train state (params, opt_state and tx) while JAX is loaded, else "tensorflow"."""
    torch = sys.modules.get("torch")
    if optimizer is not None or (torch is not None and isinstance(model, torch.nn.Module)):
        return "torch"
    if "jax" in sys.modules and all(hasattr(model, name) for name in ("params", "opt_state", "tx")):
        return "jax"
    return "tensorflow"

