"""Converted variables (conversions.py) as a runner loads, reads and forces them, framework-free:
each port object of a conversion assigns a value in its own layout (`assign`) and reads one
(`numpy`), whatever framework holds it. TorchRunner and JaxRunner share these."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from ..keys import make_key
from .conversions import Conversion

Cast = Callable[[Any, Any], np.ndarray]  # (value, port object) -> the value ready to assign


def load(conversions: Sequence[Conversion], initial: Callable[[str], np.ndarray], cast: Cast) -> None:
    """Each conversion's golden variables (`initial(name)`) into its port objects."""
    for conv in conversions:
        values = conv.values_to_port([initial(name) for name in conv.golden])
        for port, value in zip(conv.port, values):
            port.assign(cast(value, port))


def read(conversions: Sequence[Conversion]) -> List[Tuple[str, np.ndarray]]:
    """("var/<golden name>", value) of each conversion's golden variables, from the port's."""
    out: List[Tuple[str, np.ndarray]] = []
    for conv in conversions:
        values = conv.values_to_golden([port.numpy() for port in conv.port])
        out.extend((make_key("var", name), value) for name, value in zip(conv.golden, values))
    return out


def force(conversions: Sequence[Conversion], state: Mapping[str, np.ndarray], cast: Cast) -> List[str]:
    """Teacher forcing: each conversion whose golden variables `state` holds all of, set; the keys set."""
    forced: List[str] = []
    for conv in conversions:
        values = [state.get(make_key("var", name)) for name in conv.golden]
        if all(value is not None for value in values):
            for port, value in zip(conv.port, conv.values_to_port(values)):
                port.assign(cast(value, port))
            forced.extend(make_key("var", name) for name in conv.golden)
    return forced


def scales(conversions: Sequence[Conversion], state: Mapping[str, np.ndarray]) -> Dict[str, float]:
    """The port's scale of each converted golden variable (its largest |value| in the port's
    layout, where the forget bias is added): what forcing's read-back is judged against."""
    out: Dict[str, float] = {}
    for conv in conversions:
        keys = [make_key("var", name) for name in conv.golden]
        if all(key in state for key in keys):
            scale = max(float(np.max(np.abs(v), initial=0.0)) for v in conv.values_to_port([state[k] for k in keys]))
            out.update((key, scale) for key in keys)
    return out
