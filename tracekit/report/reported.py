"""What `tracekit.compare` (and a replay's check) returns: the comparison's data, with its
renderings on request: the text report, the HTML page, the assertion."""

from __future__ import annotations

from typing import Callable, Optional

from ..comparison.result import Comparison
from ..comparison.engine import compare_data
from ..comparison.select import Selection
from ..comparison.tolerance import Tolerance
from ..errors import Mismatch
from ..store import Trace
from . import html
from .comparison import render


class Reported(Comparison):
    """A Comparison that renders itself."""

    def report(self, selection: Optional[Selection] = None, width: Optional[int] = None) -> str:
        """The text report (report.comparison.render)."""
        return render(self, selection, width)

    def write_html(self, path: str, local: Optional[Comparison] = None) -> str:
        """Write the HTML report (report/html.py; needs matplotlib: the `report` extra) to
        `path`; `local`: a teacher-forced comparison of the same port (forcing="state"), shown
        next to this one. Returns the path."""
        return html.write_html(self, path, local)

    def assert_ok(self) -> None:
        """Raise tracekit.Mismatch (an AssertionError) with the report unless ok."""
        if not self.ok:
            raise Mismatch(self.report())


def compare(golden: "str | Trace", actual: "str | Trace", tolerance: "Tolerance | str | None" = None,
            progress: Optional[Callable[[int, int], None]] = None) -> Reported:
    """tracekit.compare: compare a replayed trace (or any trace) with its golden (see
    tracekit.comparison.engine.compare_data); the result renders itself with .report().
    progress(done, total) after each step: tracekit.Progress draws it on a terminal."""
    return compare_data(golden, actual, tolerance, result_type=Reported,  # type: ignore[return-value]
                        progress=progress)
