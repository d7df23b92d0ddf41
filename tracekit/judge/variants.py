"""A failing step replayed with each of the port's conversions, or settings of its own modules,
done another way.

A conversion (replay/conversions.py) says how the golden's variables are laid out in the port; a
port whose own code reads them otherwise (an LSTM cell splitting its gates in TF1's order, a
forget bias TF1 added at run time left out) computes another model from the same numbers, and no
fit of the numbers names that. So the step is run again: one step from the golden's state (an
excerpt of the golden) as the port is, which must fail as the check did, then with each variant a
conversion offers in its place. An adapter whose port's modules can be changed in place (a
PyTorch module's attributes) also offers settings to try the other way (a BatchNorm's epsilon,
Keras' 1e-3 against torch's 1e-5), which no fit names where the golden has no tap of the layer:
the loss departs first. A variant or setting under which the step matches names the slip, and the
claim is the replay that matched, not a guess. Framework-free: the adapter hands over how it reruns
its port on an excerpt with other replay options, or a setting applied."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple, Union

from ..comparison.fingerprints import VARIANT, Fingerprint
from ..replay.conversions import Conversion, carried_conversions
from ..report.reported import Reported
from ..store import Trace, open_trace
from ..store.excerpt import write_excerpt



@dataclass(frozen=True)
class Setting:
    """A setting of the port's own modules tried the other way: `code` names the convention,
    `where` the modules, `port` what they have, `other` what apply() sets (it returns the undo)."""

    code: str
    where: str
    port: str
    other: str
    apply: Callable[[], Callable[[], None]]


# rerun(excerpt, pick): the port's check of that one-step golden, with the port's conversions as
# they are (pick None), the conversion `pick[0]` of those its options give (conversions_in)
# replaced by its variant `pick[1]` (the adapter's own port where it can run again, else a fresh
# one from the factory, whose conversions are made alike: with_variant), or a Setting applied
Rerun = Callable[[Trace, Union[None, Tuple[int, int], Setting]], Reported]

_ONE_STEP = ("steps", "progress", "every")  # options that would not fit a one-step excerpt


def name_by_variants(result: Reported, trace: Trace, conversions: Sequence[Conversion], rerun: Rerun,
                     settings: Sequence[Setting] = ()) -> None:
    """Where `result` failed at a step (not in the initial state) and the port's `conversions`
    have variants, or the adapter offers `settings`: a fingerprint for each under which that step,
    replayed alone from the golden's state, matches. Nothing where the step alone matches as the
    port is (the divergence came with the state before it) or none does."""
    first = result.first_divergence
    if result.ok or first is None or first.step < 0:
        return
    tried: List[Tuple[Any, Fingerprint]] = [
        ((i, j), Fingerprint(variant.code, first.step, tuple("var/" + name for name in conv.golden), 0.0, 0.0, 0.0,
                             {VARIANT: variant.other, "port": variant.port, "conversion": conv.describe}))
        for i, conv in enumerate(conversions) for j, variant in enumerate(conv.variants())]
    tried += [(setting, Fingerprint(setting.code, first.step, (), 0.0, 0.0, 0.0,
                                    {VARIANT: setting.other, "port": setting.port, "setting": setting.where}))
              for setting in settings]
    if not tried:
        return
    with tempfile.TemporaryDirectory(prefix="tracekit-variants-") as folder:
        with open_trace(write_excerpt(trace, first.step, os.path.join(folder, "step%d.h5" % first.step))) as excerpt:
            if rerun(excerpt, None).ok:
                return
            result.fingerprints.extend(found for pick, found in tried if rerun(excerpt, pick).ok)


def one_step(options: Mapping[str, Any], pick: Union[None, Tuple[int, int], Setting]) -> Dict[str, Any]:
    """Replay options for a rerun of one step: those that would not fit a one-step excerpt left
    out, the picked conversion replaced by its variant (a Setting changes no option)."""
    kept = {name: value for name, value in options.items() if name not in _ONE_STEP}
    return with_variant(kept, pick) if isinstance(pick, tuple) else kept


def conversions_in(options: Mapping[str, Any]) -> List[Conversion]:
    """The conversions a replay's options give: convert=, and those standing in var_map."""
    return list(options.get("convert") or ()) + carried_conversions(options.get("var_map"))[1]


def with_variant(options: Mapping[str, Any], pick: Tuple[int, int]) -> Dict[str, Any]:
    """A replay's options with conversion pick[0] of those they give replaced by its variant pick[1]."""
    old = conversions_in(options)[pick[0]]
    return swapped(options, old, old.variants()[pick[1]].conversion)


def swapped(options: Mapping[str, Any], old: Conversion, new: Conversion) -> Dict[str, Any]:
    """A replay's options with the conversion `old` replaced by `new`, wherever it is given."""
    out = dict(options)
    out["convert"] = [new if conv is old else conv for conv in out.get("convert") or ()]
    var_map = out.get("var_map")
    if isinstance(var_map, dict):
        out["var_map"] = {name: new if value is old else value for name, value in var_map.items()}
    elif isinstance(var_map, (list, tuple)):
        out["var_map"] = [(pattern, new if value is old else value) for pattern, value in var_map]
    return out
