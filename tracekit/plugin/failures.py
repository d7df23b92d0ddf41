"""How a tracekit error raised into a test is shown: its message first, then the test's own
frames (the user's code), without the tens of tracekit frames between them, which say
nothing to someone porting a model. `pytest --tb=long` (or native) shows everything."""

from __future__ import annotations

import os
from typing import Any, List, Optional

from ..errors import TracekitError

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FULL_STYLES = ("long", "native")
HIDDEN_NOTE = "(tracekit's own frames are hidden; pytest --tb=long shows them)"


def _own(path: str) -> bool:
    """A frame of tracekit itself, of pytest or of pluggy: not the user's code."""
    path = os.path.abspath(path)
    if path.startswith(PACKAGE + os.sep):
        return True
    parts = path.split(os.sep)
    return "_pytest" in parts or "pluggy" in parts


def shown(excinfo: Any, tbstyle: str) -> Optional[str]:
    """The failure's text for a TracekitError (None: pytest's own rendering is kept): the error's
    type and message, then each of the user's frames it passed through, innermost last."""
    if tbstyle in FULL_STYLES or not isinstance(excinfo.value, TracekitError):
        return None
    lines: List[str] = ["%s: %s" % (type(excinfo.value).__name__, excinfo.value), ""]
    frames = [entry for entry in excinfo.traceback if not _own(str(entry.path))]
    for entry in frames:
        lines.append("%s:%d: in %s" % (_relative(str(entry.path)), entry.lineno + 1, entry.name))
        try:
            statement = str(entry.statement).strip()
        except Exception:  # no source (an interactive or generated frame)
            statement = ""
        lines.extend("    " + line for line in statement.splitlines()[:6])
    if len(frames) < len(excinfo.traceback):
        lines.append(HIDDEN_NOTE)
    return "\n".join(lines)


def _relative(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if relative.startswith(os.pardir) else relative
