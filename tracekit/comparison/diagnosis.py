"""What a finished comparison can tell of why it failed: machine round-off within the
cross-machine bound, known TF1/Keras conventions, usual migration and distribution slips,
and the first divergence's values where it happened."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..keys import step_label
from ..store import Trace
from ..store.meta import ReplayMeta, replay_of
from ..store.digest import Digest
from . import activations, dropout
from .consistent import consistent
from .conventions import ADAM_EPSILON, convention_hints
from .distribution import distribution_hints, layout
from .epsilon import EPSILON_INSIDE
from .fingerprints import AVERAGE_RATE, EPSILON, EPSILONS, fingerprints, from_golden_state
from .loss_terms import loss_term
from .result import Comparison, Divergence, RoundoffCause
from .sparse import SparseRows
from .slips import BN_MOMENTUM, OPTIMIZER_SETTING, slip_hints
from .tolerance import ROUNDOFF_ULPS

# Elements of the first divergence's two values a result keeps (a sample of larger ones).
VALUE_SAMPLE = 100_000


def with_values(first: Divergence, g_value: Any, a_value: Any) -> Divergence:
    """The first divergence with its two values' elements at the worst index and samples of both
    (a digest's sampled elements, where the golden keeps a digest)."""
    index = first.stats.worst_index
    if isinstance(g_value, Digest):
        return replace(first, golden_at_worst=g_value.at(index), actual_at_worst=a_value.at(index),
                       golden_value=g_value.sample, actual_value=a_value.sample)
    return replace(first, golden_at_worst=_element(g_value, index), actual_at_worst=_element(a_value, index),
                   golden_value=_sample(g_value), actual_value=_sample(a_value))


def diagnose(result: Comparison, golden: Trace, values: Optional[Tuple[Any, Any]], actual_meta: Mapping[str, Any],
             code: Optional[bool], step_values: Optional[Mapping[str, Tuple[Any, Any]]] = None,
             losses: Optional[Mapping[int, Tuple[float, float]]] = None,
             rows: Optional[Mapping[str, SparseRows]] = None) -> None:
    """Fill in what the finished `result` can tell of why: whether machine round-off explains
    it, the strategy the replay ran under, and for its first divergence (whose golden and
    replay values are `values`) the TF1/Keras conventions, migration slips and distribution
    slips it looks like (none where the golden keeps a digest of it), and the fingerprints of the
    failing variables (or gradients) at its step, whose two values are `step_values`, or of a
    loss's parts, from its two values at each step that started from the golden's (`losses`). `code`:
    whether the same program made both traces (engine.same_code); `rows`: at the first
    divergence's step, the rows of each variable's sparse gradient."""
    result.likely_cause = _roundoff_cause(result, code)
    result.distribution = layout(actual_meta)
    first = result.first_divergence
    if first is None or values is None:
        return
    if isinstance(values[0], Digest):  # only a sample of each side: the updates are fitted on it (sampled.py)
        if first.kind in ("var", "slot", "grad") and from_golden_state(replay_of(actual_meta), first.step):
            _fit_updates(result, golden, first, step_values)
            consistent(result, golden, actual_meta)
        return
    g_value, a_value = values

    def agreed(kinds: Sequence[str]) -> bool:
        return _agreed(result, first.step, kinds)
    result.conventions = convention_hints(golden, first.step, first.kind, first.key, agreed, g_value, a_value,
                                          rows or {})
    result.slips = slip_hints(golden, first.step, first.key, g_value, a_value, agreed, actual_meta)
    misused = dropout.rates(golden.meta, (replay_of(actual_meta) or ReplayMeta()).draw_rates)
    result.slips = dropout.dropout_slips(golden, first.step, misused) + result.slips  # the draws say it first
    if result.conventions:  # the convention fitted from the numbers says it: its setting again is noise
        result.slips = [hint for hint in result.slips if hint.code != OPTIMIZER_SETTING]
    if first.kind == "loss":
        result.fingerprints = loss_term(golden, first.key, first.step, losses or {}, result.tolerance.resolve)
    elif first.kind == "tap":  # a layer's output departs first: an activation or a normalization changed
        result.fingerprints = activations.fingerprints(
            first.key, first.step, g_value, a_value,
            result.tolerance.resolve("tap", first.name, first.step, np.asarray(a_value).dtype.name))
    elif from_golden_state(replay_of(actual_meta), first.step):
        _fit_updates(result, golden, first, step_values)
    elif first.kind in ("var", "slot", "grad") and replay_of(actual_meta) is not None:
        result.notes.append("the failing updates are not fitted to known slips: %s started from the port's own "
                            "state, not the golden's (replay with forcing='state' to have them named)"
                            % step_label(first.step))
    consistent(result, golden, actual_meta)
    result.distribution_hints = distribution_hints(golden, result.distribution, first.step, first.kind,
                                                   first.key, g_value, a_value)


def _fit_updates(result: Comparison, golden: Trace, first: Divergence,
                 step_values: Optional[Mapping[str, Tuple[Any, Any]]]) -> None:
    """The fingerprints of the failing updates at the first divergence's step (it started from
    the golden's state), and what a named cause makes redundant among the hints."""
    result.fingerprints = fingerprints(golden, first.step, step_values or {}, result.tolerance.resolve, first.kind)
    # a named cause is the verified fit of what a hint guesses at from the first tensor: said once
    named = {hint.code for hint in result.fingerprints}
    if {EPSILON, EPSILON_INSIDE} <= named:  # one optimizer, one form: a fit to no usual epsilon gives way
        fits = [hint for hint in result.fingerprints if hint.code in (EPSILON, EPSILON_INSIDE)]
        odd = [hint for hint in fits if not any(abs(hint.port / e - 1) < 0.01 for e in EPSILONS)]
        if odd and len(odd) < len(fits):
            result.fingerprints = [hint for hint in result.fingerprints if hint not in odd]
            result.notes.append("not named: the updates of %s also fit epsilon=%s, no epsilon an optimizer "
                                "defaults to or a team passes; the others' fit, named below, is one setting"
                                % (", ".join(sorted({k for hint in odd for k in hint.keys})),
                                   ", ".join("%.2g" % hint.port for hint in odd)))
    if named & {EPSILON, EPSILON_INSIDE}:
        result.conventions = [hint for hint in result.conventions if hint.code != ADAM_EPSILON]
    if AVERAGE_RATE in named:
        result.slips = [hint for hint in result.slips if hint.code != BN_MOMENTUM]


def _sample(value: Any) -> Any:
    """A numeric array cut to at most VALUE_SAMPLE elements (every k-th, flattened), so a result
    does not keep a large tensor alive; anything else as it is."""
    array = np.asarray(value) if isinstance(value, np.ndarray) else None
    if array is None or array.size <= VALUE_SAMPLE:
        return value
    return array.reshape(-1)[::array.size // VALUE_SAMPLE + 1].copy()


def _element(value: Any, index: Optional[Tuple[int, ...]]) -> Any:
    """value[index] as a Python number, or None where there is no such element."""
    if value is None or index is None:
        return None
    try:
        return np.asarray(value)[tuple(index)].item()
    except (IndexError, TypeError, ValueError):
        return None


def _agreed(result: Comparison, step: int, kinds: Sequence[str]) -> bool:
    """Every tensor of these kinds compared at `step` agreed, gradients among them."""
    compared = [t.by_step[step] for t in result.tensors if t.kind in kinds and step in t.by_step]
    grads = [t for t in result.tensors if t.kind == "grad" and step in t.by_step]
    return bool(grads) and all(stats.ok for stats in compared)


def _roundoff_cause(result: Comparison, code: Optional[bool]) -> Optional[RoundoffCause]:
    """Round-off explains the mismatch when the machines differ in what selects kernels and
    every failing tensor is within the cross-machine bound of its kind at every step."""
    changes = result.environment_diff.machine_changes
    if result.ok or not changes or result.missing or result.short is not None:
        return None
    closest: Optional[Tuple[float, str, float, float]] = None
    for tensor in result.tensors:
        bound = ROUNDOFF_ULPS.get(tensor.kind, 0.0)
        for step, stats in tensor.by_step.items():
            if stats.ok or (step in tensor.noise and result.tolerance.accept_noise):
                continue
            if stats.problem or stats.nonfinite or stats.ulps > bound:
                return None
            if closest is None or stats.ulps / bound > closest[0]:
                closest = (stats.ulps / bound, tensor.key, stats.ulps, bound)
    if closest is None:
        return None
    port = code is False or not result.environment_diff.same_framework
    likely = code is True and not port and any(not c.unknown for c in changes)
    return RoundoffCause(closest[1], closest[2], closest[3], result.environment_diff.kernel_changes, port, likely)
