"""Small text helpers shared by the renderers: tables and sizes."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence


def num(x: float) -> str:
    """A statistic in three significant digits."""
    return "%.3g" % x


def size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(nbytes) < 1024 or unit == "GiB":
            return ("%d %s" % (nbytes, unit)) if unit == "B" else ("%.1f %s" % (nbytes, unit))
        nbytes /= 1024.0
    return "%.1f GiB" % nbytes


def elide(text: str, width: int) -> str:
    """`text` cut to `width` characters by dropping its middle (names differ at both ends)."""
    if len(text) <= width:
        return text
    keep = max(width - 3, 2)
    return text[:keep // 2] + "..." + text[len(text) - (keep - keep // 2):]


def table(header: Sequence[str], rows: Sequence[Sequence[object]], right: Sequence[int] = (),
          width: Optional[int] = None, shrink: int = 1) -> List[str]:
    """Aligned columns; columns listed in `right` are right-aligned (numbers). With `width`, the
    `shrink` column (the names) is elided in the middle so lines fit in `width` characters,
    keeping at least 16 of its characters."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    if width is not None and header:
        over = sum(widths) + 2 * (len(widths) - 1) - width
        if over > 0:
            widths[shrink] = max(widths[shrink] - over, 16, len(cells[0][shrink]))
            for row in cells:
                row[shrink] = elide(row[shrink], widths[shrink])
    lines = []
    for n, row in enumerate(cells):
        parts = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, (bytes, str)) and not value else str(value)
    return text if len(text) <= 100 else text[:97] + "..."


def nested_lines(prefix: str, value: Any, out: List[str]) -> None:
    """Nested mappings as "  environment.tensorflow: 1.15.5" lines, appended to `out`."""
    if isinstance(value, dict) and value:
        for key in sorted(value, key=str):
            nested_lines("%s.%s" % (prefix, key) if prefix else str(key), value[key], out)
    else:
        out.append("  %s: %s" % (prefix, _short(value)))
