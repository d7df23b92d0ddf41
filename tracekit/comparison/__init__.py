"""Comparing traces: tolerance policies, statistics, the first divergence, the difference
of the two runs' environments. numpy only."""

from .engine import compare_data
from .result import Comparison, Divergence, RoundoffCause, TensorResult
from .envdiff import Change, EnvironmentDiff, Profile, environment_diff
from .stats import Stats
from .tolerance import Rule, Tolerance

__all__ = ["Change", "Comparison", "Divergence", "EnvironmentDiff", "Profile", "RoundoffCause", "Rule", "Stats",
           "TensorResult", "Tolerance", "compare_data", "environment_diff"]
