"""A tensor's named transformation where it is no change of a few continuous parameters (those
fitting.smallest_change searches): a clip, a permutation of blocks, a momentum convention, the
place of Adam's epsilon. Each prediction of the port's value must pass fitting.explains to name
one. numpy only; Python 3.7 syntax.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict

import numpy as np


@dataclass(frozen=True)
class Explained:
    """One tensor (`key`) explained by the transformation `code`, its parameter on each side
    (`golden`, `port`), the ulps the prediction leaves and what else the fit found (`detail`:
    its string values tell transformations of one code apart, a permutation's order)."""

    key: str
    code: str
    golden: float
    port: float
    ulps: float
    detail: Dict[str, Any] = field(default_factory=dict)


def largest(predicted: Any, actual: Any) -> float:
    """The largest difference of a prediction from the port's value."""
    wanted = np.asarray(actual, np.float64)
    return float(np.max(np.abs(np.asarray(predicted, np.float64).reshape(wanted.shape) - wanted)))
