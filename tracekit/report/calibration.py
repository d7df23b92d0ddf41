"""What `tracekit.tf2.calibrate` measured and derived, as data, and its text: the spread of the
perturbed runs per kind, the bounds widened past the floor, the tensors refused past the cap,
the tolerance itself (as TOML too), and the port under it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from .._version import __version__
from ..comparison.asdict import plain
from ..comparison.calibration import CALIBRATED_KINDS, CAP_ULPS, Derived, Spread
from ..comparison.tolerance import TRAINING_ULPS, Tolerance
from ..errors import UsageError
from ..keys import step_label
from ..lifecycle.atomic import write_text
from ..store.remote import is_url
from .comparison import headline
from .environment import summary
from .reported import Reported
from .text import table


@dataclass
class Calibration:
    """`tolerance` covers `spread` (the deviation of `spread.runs` replays started one ulp off
    from the unperturbed one) x `margin`, above the floor and up to the cap; `port` is the
    unperturbed replay against the golden under it."""

    golden: str
    margin: float
    spread: Spread
    derived: Derived
    port: Reported
    by: str = "tracekit.tf2.calibrate"  # the entry point that calibrated (its framework's)

    @property
    def tolerance(self) -> Tolerance:
        return self.derived.tolerance

    @property
    def ok(self) -> bool:
        """The port passes under its calibrated tolerance."""
        return self.port.ok

    def report(self) -> str:
        return "\n".join(lines(self))

    def to_toml(self) -> str:
        """The tolerance as a TOML file (tracekit diff --tolerance), headed by where it came from."""
        head = ["# calibrated by %s (tracekit %s) for %s" % (self.by, __version__, self.golden),
                "# on %s" % summary(self.port.environment_diff.actual),
                "# %s started one ulp off, %d steps, margin %g; floor: the training profile; cap %g ulps"
                % (_replays(self.spread.runs), self.spread.steps, self.margin, CAP_ULPS)]
        head += ["# refused past the cap (held there, accept_noise): %s from step %d" % (u.key, u.step)
                 for u in self.derived.unbounded]
        return "\n".join(head) + "\n" + self.tolerance.to_toml()

    def save(self, path: str) -> str:
        """Write to_toml() to `path` (atomically) and return the path."""
        try:
            write_text(path, self.to_toml())
        except OSError as exc:
            raise UsageError("cannot write the tolerance to %s: %s" % (path, exc.strerror or exc)) from None
        return path

    def to_dict(self) -> Dict[str, Any]:
        """Plain, JSON-serializable data: what was measured, the tolerance, and the port's
        comparison under it (without per-step statistics)."""
        return plain({"golden": self.golden, "ok": self.ok, "runs": self.spread.runs, "steps": self.spread.steps,
                      "margin": self.margin, "cap_ulps": CAP_ULPS, "largest": self.spread.largest(),
                      "bounds": [{"key": b.key, "steps": [b.start, b.stop], "measured": b.measured, "ulps": b.ulps}
                                 for b in self.derived.bounds],
                      "unbounded": [{"key": u.key, "step": u.step, "measured": u.measured}
                                    for u in self.derived.unbounded],
                      "tolerance": self.tolerance.to_dict(), "port": self.port.to_dict(by_step=False)})


def _replays(count: int) -> str:
    return "1 replay" if count == 1 else "%d replays" % count


def step_range(start: int, stop: Optional[int]) -> str:
    """Steps [start, stop) as text: "4", "4-7", "8-" (open)."""
    if stop is None:
        return "%d-" % start
    return str(start) if stop == start + 1 else "%d-%d" % (start, stop - 1)


def lines(found: Calibration) -> List[str]:
    """The report: what was measured, every rule past the floor (those at the cap marked), the
    tensors refused, and the port under the result."""
    spread = found.spread
    largest = spread.largest()
    out = ["calibrate %s: %s started one ulp off, %d steps, margin %g"
           % (found.golden, _replays(spread.runs), spread.steps, found.margin),
           "  largest deviation from the unperturbed replay, in eps x scale: %s"
           % ", ".join("%s %.3g" % (k, largest[k]) for k in CALIBRATED_KINDS if k in largest),
           "  step 0: the default tolerance; floor from step 1: the training profile (%s); cap %g (1/64 of a "
           "float32 tensor's scale)" % (", ".join("%s %g" % kv for kv in sorted(TRAINING_ULPS.items())), CAP_ULPS)]
    bounds = found.derived.bounds
    if bounds:
        out.append("widened past the floor (%d rules):" % len(bounds))
        out += ["  " + line for line in table(
            ["tensor", "steps", "deviation", "allowed"],
            [[b.key, step_range(b.start, b.stop), "%.3g" % b.measured,
              "%g%s" % (b.ulps, " (cap)" if b.ulps >= CAP_ULPS else "")] for b in bounds], right=(2, 3))]
    else:
        out.append("nothing needs more than the floor")
    for u in found.derived.unbounded:
        out.append("refused past the cap: %s from %s (one ulp grew to %.3g eps x its scale); held at the cap, its "
                   "failures pass only where the noise analysis explains them (accept_noise)"
                   % (u.key, step_label(u.step), u.measured))
    out.append("the port against the golden under it: %s" % ("MATCH" if found.port.ok else headline(found.port)))
    if not found.port.ok:
        out.append("  a calibrated tolerance covers round-off, not a step that computes differently: "
                   "tracekit localize finds where the port departs")
    return out


def default_path(golden: str) -> str:
    """Where `tracekit calibrate` writes the tolerance by default: beside the golden (for a golden at
    a URL, in the working directory, under the golden's name)."""
    if is_url(golden):
        golden = golden.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    return os.path.splitext(golden)[0] + ".tolerance.toml"
