"""The source line's text: a variable's update (its assign, and the span of the lines computing
it), else where the tensor was made; a side that knows no line says why."""

from __future__ import annotations

from tracekit.report.sources import side, source_line
from tracekit.sources import Lines, Paired, Source


def test_an_update_shows_its_assign_and_its_span():
    update = (Source("/x/optimization.py", 131, code="next_m = m"), Source("/x/optimization.py", 147),
              Source("/x/optimization.py", 153, code="param.assign(next_param)"))
    assert side(Lines(Source("/x/modeling.py", 9), update)) == \
        "optimization.py:153 `param.assign(next_param)` (the update: optimization.py:131-153)"
    assert side(Lines(Source("/x/modeling.py", 9, code="w = v"))) == "modeling.py:9 `w = v`"
    assert side(Lines()) is None


def test_a_side_without_a_line_says_why():
    text = source_line(Paired("var/w:0", Lines(), Lines(update=(Source("/p/port.py", 4, code="w.assign(x)"),))))
    assert text.startswith("  source of var/w:0: TF1 not recorded (a golden from an older tracekit")
    assert text.endswith("; port port.py:4 `w.assign(x)`")
    assert "port not known" in source_line(Paired("loss/loss", Lines(Source("/t/a.py", 3)), Lines()))
