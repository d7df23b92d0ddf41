"""What only a person at a terminal sees: a progress line for long work, and colour.

Both stay out of logs: the progress line is drawn only when its stream is a terminal (not
in CI logs, pipes or pytest's captured output), and colour only on a terminal and never
when NO_COLOR is set (https://no-color.org).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Optional, TextIO

GREEN, RED, BOLD = "32", "31", "1"


def is_terminal(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def colour(text: str, code: str, stream: Optional[TextIO] = None) -> str:
    """`text` in colour `code` (an ANSI SGR number) if `stream` (stdout) is a terminal and
    NO_COLOR is not set; else as it is."""
    if os.environ.get("NO_COLOR") or not is_terminal(stream if stream is not None else sys.stdout):
        return text
    return "\033[%sm%s\033[0m" % (code, text)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return "%d s" % seconds
    if seconds < 3600:
        return "%d min %02d s" % divmod(seconds, 60)
    return "%d h %02d min" % (seconds // 3600, seconds % 3600 // 60)


class Progress:
    """Call it with (done, total) after each step: one line on stderr, redrawn at most five
    times a second, saying the steps done (of the total, when known), the rate and the time
    left; the line ends when done reaches total or on close(). Draws nothing unless stderr is
    a terminal. Pass it as `progress=` to tracekit.compare, tracekit.tf2.replay and the
    recorder."""

    def __init__(self, label: str, stream: Optional[TextIO] = None, unit: str = "steps",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.unit = unit
        self.enabled = is_terminal(self.stream)
        self._clock = clock
        self._start: Optional[float] = None
        self._last = float("-inf")
        self._width = 0  # of the line drawn last: a shorter one must cover it
        self._open = False

    def line(self, done: int, total: Optional[int], elapsed: float) -> str:
        """The text for `done` of `total` steps after `elapsed` seconds."""
        count = "%d/%d" % (done, total) if total else "%d" % done
        parts = ["%s: %s %s" % (self.label, count, self.unit)]
        if elapsed > 0 and done:
            rate = done / elapsed
            parts.append("%.3g %s/s" % (rate, self.unit))
            if total and done < total:
                parts.append("%s left" % _duration((total - done) / rate))
            elif total:
                parts.append("done in %s" % _duration(elapsed))
        return ", ".join(parts)

    def __call__(self, done: int, total: Optional[int] = None) -> None:
        now = self._clock()
        if self._start is None:
            self._start = now
        finished = bool(total) and done >= (total or 0)
        if not self.enabled or (now - self._last < 0.2 and not finished):
            return
        self._last = now
        text = self.line(done, total, now - self._start)
        self.stream.write("\r" + text.ljust(self._width) + ("\n" if finished else ""))
        self.stream.flush()
        self._width, self._open = (0, False) if finished else (len(text), True)

    def close(self) -> None:
        """End the line if it is still open (the work stopped short of its total, or had none)."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
