"""The HTML report's figures, drawn with matplotlib (the optional `report` extra).

Line plots become inline SVG, the heatmap a base64 PNG. The same data gives the same bytes:
the SVG's id salt is fixed and neither format carries a date or the software's version.
"""

from __future__ import annotations

import base64
import io
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import MissingDependency

GOLDEN_STYLE = {"color": "#1f77b4", "linewidth": 1.6}
ACTUAL_STYLE = {"color": "#d62728", "linewidth": 1.2, "linestyle": "--"}
KIND_COLORS = {"input": "#7f7f7f", "random": "#bcbd22", "tap": "#2ca02c", "fetch": "#8c564b", "loss": "#d62728",
               "lr": "#9467bd", "grad": "#ff7f0e", "var": "#1f77b4", "slot": "#17becf"}
FLOOR = 1e-12  # errors of 0 are drawn here on log axes (and said so in the legend)


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend, set up for reproducible output."""
    try:
        import matplotlib
    except ImportError:
        raise MissingDependency("the HTML report draws its plots with matplotlib, which is not installed: "
                                "pip install 'tracekit[report]' (or pip install matplotlib); the text report "
                                "(tracekit diff) and --json need nothing more") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    matplotlib.rcParams.update({"svg.hashsalt": "tracekit", "svg.fonttype": "path", "font.size": 9,
                                "axes.grid": True, "grid.alpha": 0.3, "figure.dpi": 100})
    return plt


def _svg(fig: Any) -> str:
    out = io.StringIO()
    fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    pyplot().close(fig)
    text = out.getvalue()
    return text[text.index("<svg"):]  # inline: without the XML declaration and doctype


def _png(fig: Any) -> str:
    out = io.BytesIO()
    fig.savefig(out, format="png", bbox_inches="tight", metadata={"Software": None})
    pyplot().close(fig)
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode("ascii")


def overlay(title: str, curves: Dict[str, Tuple[Sequence[int], Sequence[float], Sequence[int], Sequence[float]]],
            ylabel: str) -> str:
    """Golden (solid) and actual (dashed) of each named scalar against step, as SVG.
    curves: name -> (golden steps, golden values, actual steps, actual values)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for i, (name, (gs, gv, as_, av)) in enumerate(sorted(curves.items())):
        shade = 1.0 - 0.25 * min(i, 3)
        ax.plot(gs, gv, label="%s (golden)" % name, alpha=shade, **GOLDEN_STYLE)
        if len(as_):
            ax.plot(as_, av, label="%s (actual)" % name, alpha=shade, **ACTUAL_STYLE)
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, loc="best")
    return _svg(fig)


def errors_by_kind(title: str, series: Dict[str, Tuple[List[int], List[float]]], limit: Dict[str, List[float]],
                   first: Optional[Tuple[int, str]], ylabel: str) -> str:
    """Per kind, the largest error of its tensors at each step on a log axis, each with its
    tolerance as a thin line of the same colour, and a marker at the first divergence."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for kind, (steps, values) in series.items():
        color = KIND_COLORS.get(kind, "#333333")
        ax.plot(steps, np.maximum(values, FLOOR), color=color, linewidth=1.4, marker=".", markersize=3, label=kind)
        if kind in limit and any(v > 0 for v in limit[kind]):
            ax.plot(steps, np.maximum(limit[kind], FLOOR), color=color, linewidth=0.8, linestyle=":")
        if first is not None and first[1] == kind and first[0] in steps:
            at = steps.index(first[0])
            ax.plot([first[0]], [max(values[at], FLOOR)], marker="X", markersize=11, color="black", linestyle="none",
                    label="first divergence")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel("step (-1: initial state)")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, loc="best", ncol=2, title="dotted: tolerance; 0 drawn at %g" % FLOOR, title_fontsize=7)
    return _svg(fig)


def heatmap(names: List[str], steps: List[int], log_errors: np.ndarray, title: str) -> str:
    """Tensors (rows, worst first) x steps of log10 relative error, as a PNG data URL."""
    plt = pyplot()
    height = min(1.2 + 0.22 * len(names), 14.0)
    fig, ax = plt.subplots(figsize=(7.5, height))
    masked = np.ma.masked_invalid(log_errors)
    image = ax.imshow(masked, aspect="auto", interpolation="nearest", cmap="magma_r", vmin=-9, vmax=1,
                      extent=(steps[0] - 0.5, steps[-1] + 0.5, len(names) - 0.5, -0.5))
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels([n if len(n) <= 48 else n[:22] + "..." + n[-23:] for n in names], fontsize=6)
    ax.set_xlabel("step")
    ax.set_title(title)
    ax.grid(False)
    fig.colorbar(image, ax=ax, label="log10 relative error (blank: not compared)")
    return _png(fig)


def error_vs_magnitude(golden: np.ndarray, actual: np.ndarray, atol: float, rtol: float, title: str) -> str:
    """|actual - golden| against |golden| for every element, on log axes, with the tolerance
    atol + rtol * |golden|: round-off crowds the diagonal near zero, a bug sits above it everywhere."""
    plt = pyplot()
    g = np.abs(golden.astype(np.float64).ravel())
    err = np.abs(actual.astype(np.float64).ravel() - golden.astype(np.float64).ravel())
    keep = np.isfinite(g) & np.isfinite(err)
    g, err = g[keep], err[keep]
    if g.size > 20000:  # enough points to see the shape; a fixed stride keeps the output the same
        stride = g.size // 20000 + 1
        g, err = g[::stride], err[::stride]
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    ax.scatter(np.maximum(g, FLOOR), np.maximum(err, FLOOR), s=4, alpha=0.5, color="#d62728", linewidths=0,
               label="elements")
    top = max(float(g.max()) if g.size else 1.0, FLOOR * 10)
    positive = g[g > 0]
    bottom = max(float(positive.min()) / 10 if positive.size else FLOOR, FLOOR)
    xs = np.logspace(np.log10(bottom), np.log10(top), 50)
    ax.plot(xs, np.maximum(atol + rtol * xs, FLOOR), color="black", linewidth=1, linestyle=":",
            label="tolerance atol + rtol*|golden|")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("|golden|")
    ax.set_ylabel("|actual - golden|")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="best")
    return _svg(fig)
