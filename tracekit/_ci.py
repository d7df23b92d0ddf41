"""Whether this run is CI: the one definition tracekit, its tests and its scripts use. CI is set,
and not empty, "false" or "0" (in any case): then no golden is created, rewritten or deleted,
and what a developer's machine may skip (the legacy environment, a browser) must be there.

Dependency-free, so a script without tracekit's environment asks it as a file:
`python3 tracekit/_ci.py` exits 0 in CI, 1 elsewhere. Python 3.7 syntax."""

import os
import sys
from typing import Mapping, Optional


def in_ci(environ: Optional[Mapping[str, str]] = None) -> bool:
    value = (os.environ if environ is None else environ).get("CI")
    return value is not None and value.strip().lower() not in ("", "false", "0")


if __name__ == "__main__":
    sys.exit(0 if in_ci() else 1)
