"""Text of the source lines behind a comparison's first divergence and its named causes
(tracekit/sources.py): the TF1 program's line and the port's, side by side."""

from __future__ import annotations

from typing import Callable, List, Optional

from ..comparison.fingerprints import Fingerprint
from ..comparison.loss_terms import source_key
from ..comparison.result import Comparison
from ..sources import Lines, Paired, span


def side(lines: Lines) -> Optional[str]:
    """One side's line: a variable's update (the assign, and the span of the lines computing
    it), else where the tensor was made."""
    if lines.update:
        text = lines.update[-1].short()
        return text + (" (the update: %s)" % span(lines.update) if len(lines.update) > 1 else "")
    return lines.made.short() if lines.made is not None else None


def source_line(found: Paired) -> str:
    tf1, port = side(found.tf1), side(found.port)
    return "  source of %s: TF1 %s; port %s" % (
        found.key, tf1 or "not recorded (a golden from an older tracekit, or an op without a Python line)",
        port or "not known (the port's step did not make it where tracekit sees: a tap, a gradient call, an "
                "optimizer's apply_gradients or a variable's assign)")


def divergence_source(result: Comparison) -> List[str]:
    """The line beside the first divergence, where a side knows one."""
    first = result.first_divergence
    found = None if first is None else result.sources.get(first.key)
    return [] if found is None else [source_line(found)]


def fingerprint_lines(result: Comparison, render: Callable[[Fingerprint], str]) -> List[str]:
    """Each named cause rendered, with the source of the first tensor it explains."""
    out = []
    for hint in result.fingerprints:
        out.append(render(hint))
        key = source_key(hint)
        found = None if key is None else result.sources.get(key)
        if found is not None:
            out.append(source_line(found))
    return out
