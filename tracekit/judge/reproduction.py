"""The one-step reproduction localize writes: the script beside it, which replays that step with
the port (make_port, importable by name) under the tolerance localize used and exits 1 while the
step still computes differently (written from TEMPLATE); and the check that the reproduction,
replayed, fails as the forced replay did, for that reason only: the same first tensor and named
causes, from every variable, slot and counter of the step's starting state, each loaded and
read back."""

from __future__ import annotations

import os
from string import Template
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..comparison.result import Comparison
from ..comparison.tolerance import Tolerance
from ..keys import INITIAL_STEP, STATE_KINDS, split_key
from ..store import open_trace

TEMPLATE = Template('''\
"""Replays one step of a golden where the port first computes differently (tracekit localize)."""
import tracekit
import $package
from $module import $factory_root

made = $factory()
${left_out}result = $package.check($reproduction, made[1], $holder=made[0], tolerance=$tolerance$options,
                            **(made[2] if len(made) > 2 else {}))
print(result.report())
raise SystemExit(0 if result.ok else 1)
''')


def write_script(reproduction: str, make_port: Any, tolerance: Any, options: Mapping[str, Any],
                 package: str = "tracekit.tf2", holder: str = "model") -> Optional[str]:
    """The script's path (beside `reproduction`), or None where make_port is not importable by
    name. It checks with `package`'s check (tracekit.tf2, tracekit.torch, tracekit.jax), the
    factory's first item passed as `holder` (model=, state=). It passes on the tolerance (a
    Tolerance as a TOML file beside it) and the replay options that are plain values
    (random="none", steps, ...); it names the ones it cannot write (a var_map function)."""
    module, name = getattr(make_port, "__module__", None), getattr(make_port, "__qualname__", "")
    if not module or not name or "<" in name or module == "__main__":
        return None
    literal = {k: v for k, v in options.items() if isinstance(v, (str, int, float, bool, type(None)))}
    left_out = sorted(set(options) - set(literal))
    tolerance_code = repr(tolerance if isinstance(tolerance, str) else None)
    stem = os.path.splitext(reproduction)[0]
    if isinstance(tolerance, Tolerance):  # written beside the script, which loads it
        with open(stem + ".tolerance.toml", "w", encoding="utf-8") as fh:
            fh.write(tolerance.to_toml())
        tolerance_code = "tracekit.Tolerance.load(%r)" % (stem + ".tolerance.toml")
    text = TEMPLATE.substitute(
        package=package, holder=holder, module=module, factory_root=name.split(".")[0], factory=name,
        reproduction=repr(reproduction),
        tolerance=tolerance_code, options="".join(", %s=%r" % kv for kv in sorted(literal.items())),
        left_out="# localize also had %s: pass them here as it got them\n" % ", ".join(left_out) if left_out else "")
    with open(stem + ".py", "w") as fh:
        fh.write(text)
    return stem + ".py"


def reproduces(path: str, replayed: Comparison, state: Comparison) -> Tuple[bool, str]:
    """Whether the reproduction at `path`, replayed (`replayed`), fails as the forced replay
    (`state`) did at that step, and what it did. Its initial state is the step's starting state:
    every tensor of it must read back as the golden's in the replay's initial state, except those
    the forced replay lacked too (state the port holds none of, with the reason it gave)."""
    with open_trace(path) as trace:
        initial = {key: trace.initial[key] for key in trace.initial if split_key(key)[0] in STATE_KINDS}
    loaded, wrong, absent = _loaded(initial, replayed)
    unexpected = {key: why for key, why in absent.items() if key not in _lacked(state)}
    said = "it loaded and read back %s of the step's starting state" % _counted(loaded, initial)
    if absent and not unexpected:  # what the forced replay lacked too: said, it is no other reason between them
        more = " and %d more" % (len(absent) - 3) if len(absent) > 3 else ""
        said += " (not %s%s, which the forced replay lacked too)" % (", ".join(sorted(absent)[:3]), more)
    if wrong:
        return False, "%s, and %d read back otherwise (%s): the port does not hold what it loads" % (
            said, len(wrong), ", ".join(wrong[:4]))
    if unexpected:
        return False, "%s, but not %s (%s): it starts elsewhere, and may fail for that" % (
            said, ", ".join(sorted(unexpected)[:4]), "; ".join(sorted(set(unexpected.values()))[:2]))
    first, wanted = replayed.first_divergence, state.first_divergence
    if first is None or wanted is None:
        return False, said + "; it matches"
    causes = sorted(f.code for f in replayed.fingerprints)
    expected = sorted(f.code for f in state.fingerprints)
    if first.key != wanted.key:
        return False, "%s; it fails at %s, not at %s: another reason" % (said, first.key, wanted.key)
    if causes != expected:
        return False, "%s; it fails at %s, but the named causes differ (%s, against %s)" % (
            said, first.key, ", ".join(causes) or "none", ", ".join(expected) or "none")
    return True, "%s; it fails at %s%s" % (said, first.key, ", named: " + ", ".join(causes) if causes else "")


def _loaded(initial: Mapping[str, Any], replayed: Comparison) -> Tuple[List[str], List[str], Dict[str, str]]:
    """(read back as the golden's, read back otherwise, not loaded -> why) of the reproduction's
    initial state (`initial`): the variables as its initial state compared, the slots and step
    counters as its optimizers read them back when their first update loaded them
    (Comparison.loaded)."""
    keys = list(initial)
    compared = {t.key: t for t in replayed.tensors}
    loaded_by = replayed.loaded or {}
    read_back, otherwise = set(loaded_by.get("read_back") or ()), set(loaded_by.get("otherwise") or ())
    loaded, wrong, absent = [], [], {}
    for key in keys:
        tensor = compared.get(key)
        if key in otherwise or (tensor is not None and tensor.first_failed == INITIAL_STEP):
            wrong.append(key)
        elif key in read_back or (tensor is not None and INITIAL_STEP in tensor.by_step):
            loaded.append(key)
        else:
            absent[key] = replayed.not_compared.get(key, "no port variable holds it")
    return loaded, wrong, absent


def _lacked(state: Comparison) -> Dict[str, str]:
    """What the forced replay lacked of the golden's state: not set by its forcing, not replayed."""
    out = dict(state.not_compared)
    out.update((key, "missing") for key in state.missing)
    if state.forced:
        out.update(state.forced.get("not_set") or {})
    return out


def _counted(keys: List[str], initial: Mapping[str, Any]) -> str:
    """"42 variables, 82 slots and 1 counter": integer variables are counters."""
    counters = [k for k in keys if np.asarray(initial[k]).dtype.kind in "iub"]
    kinds = [("variable", [k for k in keys if split_key(k)[0] == "var" and k not in counters]),
             ("slot", [k for k in keys if split_key(k)[0] == "slot"]), ("counter", counters)]
    parts = ["%d %s%s" % (len(found), name, "" if len(found) == 1 else "s") for name, found in kinds if found]
    return " and ".join([", ".join(parts[:-1])] + parts[-1:]) if len(parts) > 1 else (parts[0] if parts else "nothing")
