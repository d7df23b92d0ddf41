"""Comparing traces: tolerance policies, statistics, the first divergence. numpy only."""

from .engine import Comparison, Divergence, TensorResult, compare
from .stats import Stats
from .tolerance import Rule, Tolerance, guide_policy

__all__ = ["Comparison", "Divergence", "Rule", "Stats", "TensorResult", "Tolerance", "compare", "guide_policy"]
