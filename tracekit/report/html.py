"""A comparison as one self-contained HTML page: verdict, first divergence and environment
difference at the top; loss and learning rate of both runs overlaid; each kind's largest
error against step with its tolerance; a tensor x step heatmap of relative error; error
against magnitude for the first diverging tensor; and the per-tensor table (sortable).

Nothing is fetched when the page opens: styles, the table's few lines of script and every
figure are inline. The figures need matplotlib (report/plots.py); the same comparison
gives the same bytes.
"""

from __future__ import annotations

import html
import math
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..comparison.result import Comparison, TensorResult
from ..keys import step_label
from ..store import Trace, open_trace
from ..store.remote import is_url
from . import plots
from .comparison import (STAGES, cause, distribution_hint, divergence, forcing_line, form_lines, headline,
                         noise_line, tensor_rows, verdict)
from .environment import diff_lines
from .fingerprints import fingerprint
from .sources import divergence_source, fingerprint_lines
from .hints import convention, slip
from .judged import judged_lines

HEATMAP_ROWS = 40  # the worst tensors; the table lists them all
STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 16px 24px; color: #1b1b1b; }
h1 { font-size: 22px; margin: 8px 0; } h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; }
.verdict { display: inline-block; padding: 2px 10px; border-radius: 4px; color: #fff; font-weight: 600; }
.MATCH { background: #2e7d32; } .MISMATCH { background: #c62828; }
pre { background: #f6f8fa; padding: 10px; overflow-x: auto; font-size: 12.5px; white-space: pre-wrap; }
.figures { display: flex; flex-wrap: wrap; gap: 18px; } figure { margin: 0; } figcaption { font-size: 12px; color: #555; }
.figures figure { flex: 1 1 460px; max-width: 570px; }
figure svg, figure img { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: 12.5px; } th, td { padding: 3px 8px; border-bottom: 1px solid #eee; }
th { background: #f0f0f0; cursor: pointer; position: sticky; top: 0; text-align: left; } td.n { text-align: right; }
tr.fail td { background: #fdecea; } .note { color: #555; font-size: 12.5px; }
"""
# Click a header to sort by it (numbers numerically, by the cell's data-v); click again to reverse.
SCRIPT = """
document.querySelectorAll("table.sortable th").forEach(function (th, col) {
  th.addEventListener("click", function () {
    var body = th.closest("table").tBodies[0], rows = Array.prototype.slice.call(body.rows);
    var dir = th.dataset.dir === "asc" ? -1 : 1; th.dataset.dir = dir === 1 ? "asc" : "desc";
    rows.sort(function (a, b) {
      var x = a.cells[col].dataset.v, y = b.cells[col].dataset.v;
      if (x !== undefined && y !== undefined) return dir * (parseFloat(x) - parseFloat(y));
      return dir * a.cells[col].textContent.localeCompare(b.cells[col].textContent);
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""
TABLE_HEADER = ["kind", "name", "result", "failed", "first", "differ", "max abs", "max rel", "need atol",
                "need rtol", "ulps"]


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _pre(lines: Sequence[str]) -> str:
    return "<pre>%s</pre>" % _esc("\n".join(lines))


def _figure(body: str, caption: str) -> str:
    return "<figure>%s<figcaption>%s</figcaption></figure>" % (body, _esc(caption))


def _scalars(trace: Optional[Trace], kind: str) -> Dict[str, Tuple[List[int], List[float]]]:
    """name -> (steps, values) of every scalar of `kind` a trace holds."""
    out: Dict[str, Tuple[List[int], List[float]]] = {}
    if trace is None:
        return out
    for name in trace.names(kind):
        series = trace.series(kind, name)
        values = [np.asarray(v) for v in series.values]
        if values and all(v.size == 1 and v.dtype.kind in "fiu" for v in values):
            out[name] = (list(series.steps), [float(v.reshape(())) for v in values])
    return out


def _overlay(golden: Optional[Trace], actual: Optional[Trace], kind: str, title: str) -> Optional[str]:
    g, a = _scalars(golden, kind), _scalars(actual, kind)
    curves = {name: g[name] + a.get(name, ([], [])) for name in sorted(g)[:4]}
    if not curves:
        return None
    return plots.overlay(title, curves, kind)


def kind_series(result: Comparison, field: str, limit_field: str
                ) -> Tuple[Dict[str, Tuple[List[int], List[float]]], Dict[str, List[float]]]:
    """Per kind, the largest `field` of its tensors at each step (finite values only), and the
    largest `limit_field` (the tolerance's atol or rtol) there; kinds without any error are
    left out (the caption names them)."""
    values: Dict[str, Dict[int, float]] = {}
    limits: Dict[str, Dict[int, float]] = {}
    for t in result.tensors:
        for step, stats in t.by_step.items():
            v = getattr(stats, field)
            if stats.problem or not math.isfinite(v):
                continue
            row, lim = values.setdefault(t.kind, {}), limits.setdefault(t.kind, {})
            row[step] = max(row.get(step, 0.0), v)
            lim[step] = max(lim.get(step, 0.0), getattr(stats, limit_field))
    series = {k: (sorted(v), [v[s] for s in sorted(v)]) for k, v in values.items() if any(v.values())}
    return series, {k: [limits[k][s] for s in sorted(v)] for k, v in values.items() if k in series}


def heatmap_data(result: Comparison, rows: int = HEATMAP_ROWS) -> Tuple[List[str], List[int], np.ndarray]:
    """The `rows` worst tensors (failing first, then by their largest relative error) x every
    compared step: log10 of the relative error, clipped to [-9, 1]; nan where not compared."""
    def worst(t: TensorResult) -> Tuple[int, float]:
        rel = [s.max_rel for s in t.by_step.values() if not s.problem]
        return (0 if t.ok else 1, max([r if math.isfinite(r) else 1e300 for r in rel] or [0.0]))
    chosen = sorted((t for t in result.tensors if t.kind not in ("input", "random") and len(t.by_step)),
                    key=worst, reverse=True)[:rows]
    steps = sorted({s for t in chosen for s in t.by_step})
    grid = np.full((len(chosen), len(steps)), np.nan)
    column = {s: i for i, s in enumerate(steps)}
    for r, t in enumerate(chosen):
        for step, stats in t.by_step.items():
            rel = 1e300 if stats.problem else stats.max_rel
            grid[r, column[step]] = np.clip(np.log10(rel) if rel > 0 else -np.inf, -9, 1)
    return [t.key for t in chosen], steps, grid


def _magnitude(result: Comparison) -> Optional[str]:
    first = result.first_divergence
    if first is None or first.golden_value is None or first.actual_value is None:
        return None
    g, a = np.asarray(first.golden_value), np.asarray(first.actual_value)
    if g.shape != a.shape or g.dtype.kind not in "fiuc" or a.dtype.kind not in "fiuc" or g.size == 0:
        return None
    return plots.error_vs_magnitude(g.real, a.real, first.stats.atol, first.stats.rtol,
                                    "%s at %s: error against magnitude" % (first.key, step_label(first.step)))


def _table(result: Comparison) -> str:
    numeric = {3, 5, 6, 7, 8, 9, 10}
    out = ['<table class="sortable"><thead><tr>%s</tr></thead><tbody>'
           % "".join("<th>%s</th>" % _esc(h) for h in TABLE_HEADER)]
    for row in tensor_rows(result):
        cells = []
        for i, cell in enumerate(row):
            value = _sort_value(i, cell)
            cells.append('<td%s%s>%s</td>' % (' class="n"' if i in numeric else "",
                                              "" if value is None else ' data-v="%s"' % value, _esc(cell)))
        out.append('<tr class="%s">%s</tr>' % ("ok" if row[2] == "ok" else "fail", "".join(cells)))
    out.append("</tbody></table>")
    return "\n".join(out)


def _sort_value(column: int, cell: str) -> Optional[str]:
    """A numeric key for sorting the column, or None (sorted as text)."""
    text = cell.split("/")[0].rstrip("%")
    if column == 4:
        text = "-1" if cell == "initial state" else ("1e18" if cell == "-" else cell.replace("step ", ""))
    try:
        return repr(float(text))
    except ValueError:
        return None


def render(result: Comparison, golden: Optional[Trace] = None, actual: Optional[Trace] = None,
           local: Optional[Comparison] = None) -> str:
    """The page; `golden` and `actual` (open traces) give the loss and learning-rate curves;
    `local`, a teacher-forced comparison of the same port (forcing="state"), adds each step's
    own error next to the accumulated one."""
    word = "MATCH" if result.ok else "MISMATCH"
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>tracekit: %s %s</title>" % (word, _esc(os.path.basename(result.actual))),
             "<style>%s</style></head><body>" % STYLE,
             '<h1><span class="verdict %s">%s</span> %s</h1>' % (word, word, _esc(headline(result))),
             '<p class="note">%s vs golden %s: %d steps compared, %d tensors. %s</p>' % (
                 _esc(result.actual), _esc(result.golden), result.steps, len(result.tensors), _esc(verdict(result)))]
    top = ["advice: " + result.advice] if result.advice is not None else []
    top += diff_lines(result.environment_diff) + ["tolerance: %s (%s)" % (result.profile.name, result.profile.reason)]
    top += [forcing_line(result.forcing, result.forced)] if result.forcing != "none" else []
    top += ["note: " + n for n in result.notes]
    if result.short is not None:
        top.append("the replay is short: %s" % result.short)
    if result.uncompared is not None:
        top.append("not a match: %s" % result.uncompared)
    if result.missing:
        top.append("missing from the replay (%d): %s" % (len(result.missing), ", ".join(result.missing[:12])))
    top += form_lines(result)
    parts += ["<h2>Environment and tolerance</h2>", _pre(top)]
    judged = judged_lines(result)
    if judged:
        parts += ["<h2>Verdict on a long golden: the local and the drift view</h2>", _pre(judged)]
    first = result.first_divergence
    if first is not None:
        why = divergence(first) + divergence_source(result)
        why += cause(result.likely_cause) if result.likely_cause is not None else []
        why += fingerprint_lines(result, fingerprint)
        why += [convention(h) for h in result.conventions] + [slip(h) for h in result.slips]
        why += [distribution_hint(h) for h in result.distribution_hints]
        why += ["also: " + noise_line(n) for n in result.noise if n.key != first.key][:8]
        parts += ["<h2>First divergence: %s, %s (%s)</h2>" % (_esc(step_label(first.step)), _esc(first.key),
                                                             _esc(STAGES.get(first.kind, first.kind))), _pre(why)]
    figures = []
    for kind, title in (("loss", "loss: golden (solid) and actual (dashed)"),
                        ("lr", "learning rate: golden (solid) and actual (dashed)")):
        svg = _overlay(golden, actual, kind, title)
        if svg is not None:
            figures.append(_figure(svg, title if actual is not None else title + "; the actual trace was not at hand"))
    where = None if first is None else (first.step, first.kind)
    for field, limit, label in (("max_abs", "atol", "max abs error"), ("max_rel", "rtol", "max rel error")):
        series, limits = kind_series(result, field, limit)
        exact = sorted({t.kind for t in result.tensors} - set(series))
        if series:
            figures.append(_figure(plots.errors_by_kind("%s per kind" % label, series, limits, where, label),
                                   "%s of each kind's tensors at each step; dotted: the tolerance's %s%s"
                                   % (label, limit, "; no error at any step: " + ", ".join(exact) if exact else "")))
        else:
            figures.append('<p class="note">%s: no error at any step, in any kind</p>' % _esc(label))
    parts += ["<h2>Curves</h2>", '<div class="figures">%s</div>' % "".join(figures)]
    names, steps, grid = heatmap_data(result)
    if names:
        parts += ["<h2>Where the error starts and spreads</h2>",
                  _figure('<img alt="heatmap of log10 relative error" src="%s">'
                          % plots.heatmap(names, steps, grid, "log10 relative error, worst tensors first"),
                          "the %d worst tensors (of %d) against step: does error start in one layer and spread?"
                          % (len(names), len(result.tensors)))]
    if local is not None:
        parts += _local_section(result, local)
    magnitude = _magnitude(result)
    if magnitude is not None:
        parts += ["<h2>Error against magnitude, first diverging tensor</h2>",
                  _figure(magnitude, "round-off grows with |golden| along the tolerance line; a real difference "
                                     "stands above it, also at small values")]
    parts += ["<h2>Every tensor (worst step of each; click a column to sort)</h2>", _table(result),
              "<script>%s</script></body></html>" % SCRIPT]
    return "\n".join(parts) + "\n"


def _local_section(result: Comparison, local: Comparison) -> List[str]:
    """Each step's own error (teacher-forced) next to the accumulated one: per kind, and as a heatmap."""
    head = "MATCH" if local.ok else headline(local)
    parts = ["<h2>Local error: every step from the golden's state (forcing=%s)</h2>" % _esc(local.forcing),
             '<p class="note">teacher-forced: %s. Where the accumulated error grows and the local one stays '
             "small, the port drifts; where the local one is large, that step computes differently.</p>" % _esc(head)]
    figures = []
    where = None if local.first_divergence is None else (local.first_divergence.step, local.first_divergence.kind)
    for label, which in (("accumulated", result), ("local", local)):
        series, limits = kind_series(which, "max_abs", "atol")
        if series:
            figures.append(_figure(plots.errors_by_kind("max abs error per kind, %s" % label, series, limits,
                                                        where if which is local else None, "max abs error"),
                                   "%s error of each kind against step" % label))
    parts.append('<div class="figures">%s</div>' % "".join(figures))
    names, steps, grid = heatmap_data(local)
    if names:
        parts.append(_figure('<img alt="heatmap of log10 local relative error" src="%s">'
                             % plots.heatmap(names, steps, grid, "log10 local relative error, worst tensors first"),
                             "each step's own error: the %d worst tensors against step" % len(names)))
    return parts


def write_html(result: Comparison, path: str, local: Optional[Comparison] = None) -> str:
    """Write the page to `path`, reading the curves from the comparison's two traces where they
    are files (a replay compared without being saved has no actual trace: its curves are left
    out, and the page says so); `local` as for render. Returns the path."""
    traces: List[Optional[Trace]] = []
    try:
        for source in (result.golden, result.actual):
            traces.append(open_trace(source) if is_url(source) or os.path.isfile(source) else None)
        page = render(result, traces[0], traces[1], local)
    finally:
        for trace in traces:
            if trace is not None:
                trace.close()
    tmp = path + ".partial"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(page)
    os.replace(tmp, path)
    return path
