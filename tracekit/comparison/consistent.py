"""A named cause or hint that tells the port to set what its optimizer already has is not given.

"Pass epsilon=1e-8" to a port whose Adam has epsilon=1e-8 is a fit of the numbers that the port
contradicts: the update's difference looks like another epsilon's, but something else made it
(an activation computed otherwise, say, whose gradients move Adam's moments). The replay records
each optimizer's settings as the port has them (meta["replay"]["optimizer_settings"], by the
golden's variable names); a cause whose advice every variable it names already follows is
dropped, and a note says what it fitted and why it is not named. Numpy only.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..store import Trace
from ..store.meta import replay_of
from .conventions import ADAM_EPSILON, RMSPROP_EPSILON, TF1_ADAM_EPSILON, ConventionHint, variable_of
from .fingerprints import EPSILON, Fingerprint
from .momentum import MOMENTUM, NESTEROV
from .result import Comparison

TF1_RMSPROP_EPSILON = 1e-10
RTOL = 1e-6  # a setting the port has "already": equal to the advised value within float32's rounding


def consistent(result: Comparison, golden: Trace, actual_meta: Mapping[str, Any]) -> None:
    """Drop from `result` the fingerprints and convention hints whose advice the port follows."""
    replay = replay_of(actual_meta)
    ported = replay.optimizer_settings if replay is not None else {}
    if not ported:
        return
    said = len(result.notes)
    kept: List[Fingerprint] = []
    for hint in result.fingerprints:
        advice = _advice(hint)
        followed = advice is not None and _follows(golden, ported, hint.keys, *advice)
        if followed:
            result.notes.append("not named: %s's update fits %s=%g where TF1's is %g, but the port's optimizer has "
                                "%s=%g already: the difference comes from elsewhere" % (
                                    ", ".join(hint.keys), advice[0], hint.port, advice[1], advice[0], advice[1]))
        else:
            kept.append(hint)
    result.fingerprints = kept
    hints: List[ConventionHint] = []
    for convention in result.conventions:
        advice = _convention_advice(golden, convention)
        if advice is not None and _follows(golden, ported, (convention.key,), *advice):
            result.notes.append("not said: %s looks like %s's default, but the port's optimizer has %s=%g already"
                                % (convention.key, "Keras Adam's epsilon" if convention.code == ADAM_EPSILON
                                   else "Keras RMSprop's epsilon", advice[0], advice[1]))
        else:
            hints.append(convention)
    result.conventions = hints
    if len(result.notes) > said:  # something was not said: what else fits, or that nothing does
        result.notes.append("what fits instead: the causes named below" if result.fingerprints or result.conventions
                            or result.slips else
                            "nothing else tracekit knows fits: look at the update's other settings (betas, "
                            "amsgrad, momentum) and at how the gradient reaches it (clipping, a sparse gradient)")


def _advice(hint: Fingerprint) -> Optional[Tuple[str, float]]:
    """The setting a named cause tells the port to pass, and its value (TF1's)."""
    if hint.code in (EPSILON, MOMENTUM):
        return ("epsilon" if hint.code == EPSILON else "momentum"), float(hint.golden)
    if hint.code == NESTEROV:
        return "use_nesterov", float(hint.port != 1.0)  # TF1's: the other one than the port's fit
    return None


def _convention_advice(golden: Trace, hint: ConventionHint) -> Optional[Tuple[str, float]]:
    if hint.code not in (ADAM_EPSILON, RMSPROP_EPSILON):
        return None
    facts = _facts(golden, hint.key)
    recorded = (facts.get("hyper") or {}).get("epsilon") if facts else None
    default = TF1_ADAM_EPSILON if hint.code == ADAM_EPSILON else TF1_RMSPROP_EPSILON
    return "epsilon", float(recorded) if isinstance(recorded, (int, float)) else default


def _follows(golden: Trace, ported: Mapping[str, Any], keys: Tuple[str, ...], setting: str, value: float) -> bool:
    """Does the port's optimizer of every variable `keys` name have `setting` at `value`?"""
    owners = [variable_of(golden, key) for key in keys]
    if not owners or any(owner is None for owner in owners):
        return False
    for owner in owners:
        own = ported.get(owner)
        settings = own.get("settings") if isinstance(own, Mapping) else None
        pair = settings.get(setting) if isinstance(settings, Mapping) else None
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not isinstance(pair[1], (int, float)):
            return False
        if abs(float(pair[1]) - value) > RTOL * max(abs(value), 1e-30):
            return False
    return True


def _facts(golden: Trace, key: str) -> Dict[str, Any]:
    name = variable_of(golden, key)
    facts = (golden.meta.get("updates") or {}).get(name) if name else None
    return facts if isinstance(facts, dict) else {}
