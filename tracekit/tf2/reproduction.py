"""The script localize writes beside a one-step reproduction: it replays that step with the port
(make_port, importable by name) under the tolerance localize used, and exits 1 while the step
still computes differently. Written from TEMPLATE."""

from __future__ import annotations

import os
from string import Template
from typing import Any, Mapping, Optional

from ..comparison.tolerance import Tolerance

TEMPLATE = Template('''\
"""Replays one step of a golden where the port first computes differently (tracekit localize)."""
import tracekit
import tracekit.tf2
from $module import $factory_root

made = $factory()
${left_out}result = tracekit.tf2.check($reproduction, made[1], model=made[0], tolerance=$tolerance$options,
                            **(made[2] if len(made) > 2 else {}))
print(result.report())
raise SystemExit(0 if result.ok else 1)
''')


def write_script(reproduction: str, make_port: Any, tolerance: Any, options: Mapping[str, Any]) -> Optional[str]:
    """The script's path (beside `reproduction`), or None where make_port is not importable by
    name. It passes on the tolerance (a Tolerance as a TOML file beside it) and the replay
    options that are plain values (random="none", steps, ...); it names the ones it cannot
    write (a var_map function)."""
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
        module=module, factory_root=name.split(".")[0], factory=name, reproduction=repr(reproduction),
        tolerance=tolerance_code, options="".join(", %s=%r" % kv for kv in sorted(literal.items())),
        left_out="# localize also had %s: pass them here as it got them\n" % ", ".join(left_out) if left_out else "")
    with open(stem + ".py", "w") as fh:
        fh.write(text)
    return stem + ".py"
