"""localize and calibrate, framework-free: the replays that find where a port first computes
differently, and that measure how far round-off carries a model's training. Each adapter
(tf2/diagnose.py, torch/drive.py, jax/drive.py) hands over how it runs a fresh port from the
factory (Localizing, NudgedReplay); what is done with the runs is written once, here."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from ..comparison.calibration import Spread, derive
from ..comparison.tolerance import Tolerance
from ..errors import UsageError
from ..report.calibration import Calibration
from ..report.localization import Localization
from ..report.reported import Reported, compare
from ..store import Trace, open_trace
from ..store.excerpt import write_excerpt
from .local import Arbiter, arbitrate_local
from .port import plain, port_made
from .reproduction import reproduces, write_script


@dataclass(frozen=True)
class Localizing:
    """What localize needs of an adapter, each call on a fresh port from the factory.

    check(golden, forcing, steps): the port replayed and compared under localize's tolerance.
    arbitrate(golden trace, forced): the teacher-forced comparison's failing steps judged by the
      float64 arbiter, in place (judge/local.py).
    script(reproduction): the script that replays a one-step reproduction, written beside it (None
      where the factory cannot be imported by name)."""

    check: Callable[[str, str, Optional[int]], Reported]
    arbitrate: Callable[[Trace, Reported], None]
    script: Callable[[str], Optional[str]]


# replay(golden, out, nudge): a fresh port's own replay written to `out`, its start moved one ulp at
# random by the seed `nudge` (None: as loaded)
NudgedReplay = Callable[[str, str, Optional[int]], Trace]


def localize(golden: str, port: Localizing, out: Optional[str], steps: Optional[int]) -> Localization:
    """The port from its own state; if it fails, teacher-forced (each step from the golden's state),
    its failing steps arbitrated: the first the arbiter does not explain is the first local error.
    Where the golden has taps, the steps up to it once more with forcing="taps", which names the
    first layer at fault. A one-step reproduction of that step is written under `out` (a new
    temporary folder by default) and replayed once to check that it fails as the forced replay did."""
    own = port.check(golden, "none", steps)  # from the port's own state
    if own.ok:
        return Localization(golden, own, own)
    state = port.check(golden, "state", steps)
    with open_trace(golden) as trace:
        port.arbitrate(trace, state)
    found = Localization(golden, own, state)
    first = state.first_divergence
    if first is None:
        return found  # only drift, or the replay is short or misses tensors: the reports say which
    found.step, found.key = first.step, first.key
    with open_trace(golden) as trace:
        has_taps = bool(trace.names("tap"))
        if first.step < 0:
            return found  # the initial state differs: the variables as loaded, no step to reproduce
        if has_taps:
            found.taps = port.check(golden, "taps", first.step + 1)
            tapped = found.taps.first_divergence
            if tapped is not None and tapped.step == first.step:
                found.key = tapped.key
        folder = out or tempfile.mkdtemp(prefix="tracekit-localize-")
        os.makedirs(folder, exist_ok=True)
        stem = os.path.splitext(os.path.basename(trace.path))[0]
        found.reproduction = write_excerpt(trace, first.step, os.path.join(folder, "%s-step%d.h5" % (stem, first.step)))
    found.script = port.script(found.reproduction)
    found.reproduces, found.reproduced = reproduces(found.reproduction,
                                                    port.check(found.reproduction, "none", None), state)
    return found


def check_calibration(runs: int, margin: float, options: Any) -> None:
    """calibrate's own arguments, refused with what to pass."""
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise UsageError("runs must be a whole number of replays, at least 1, got %r" % (runs,))
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 1 <= margin < float("inf"):
        raise UsageError("margin must be a finite number >= 1 (the factor over the largest deviation seen), got %r"
                         % (margin,))
    if "forcing" in options:
        raise UsageError("calibrate measures how training carries round-off from step to step: it replays without "
                         "forcing, got forcing=%r" % (options["forcing"],))


def calibrate(golden: str, replay: NudgedReplay, count: int, margin: float,
              progress: Optional[Callable[[int, int], None]], by: str = "tracekit.tf2.calibrate") -> Calibration:
    """The port replayed once as it is, then `count` more times from a start moved one ulp up or
    down at random in every nonzero element (seeds 0..count-1); the tolerance derived from the
    largest deviations of those from the first, times `margin` (comparison/calibration.py), and
    the first replay compared with the golden under it."""
    spread = Spread()
    with tempfile.TemporaryDirectory(prefix="tracekit-calibrate-") as folder:
        with replay(golden, os.path.join(folder, "unperturbed.h5"), None) as base:
            for seed in range(count):
                if progress is not None:
                    progress(seed + 1, count + 1)
                with replay(golden, os.path.join(folder, "nudged-%d.h5" % seed), seed) as nudged:
                    spread.add(compare(base, nudged, Tolerance.exact()))
            derived = derive(spread, margin)
            port = compare(golden, base, derived.tolerance)
            if progress is not None:
                progress(count + 1, count + 1)
    return Calibration(golden, float(margin), spread, derived, port, by)


@dataclass(frozen=True)
class PortKind:
    """How localize and calibrate run a port of a framework other than TensorFlow (torch/drive.py,
    jax/drive.py): `package` and `holder` name its check and the keyword its model or state is
    passed by, in a reproduction's script; run(golden, port, where) is the replay of a port made
    by the factory, (model or state, step, replay options), as an object whose replay(out, watch,
    stop, nudge) runs it; arbiter(golden trace, make_port) is its float64 arbiter."""

    package: str
    holder: str
    run: Callable[[Any, Tuple[Any, Any, Dict[str, Any]], str], Any]
    arbiter: Callable[[Trace, Callable[[], Any]], Arbiter]


def localize_port(kind: PortKind, golden: str, make_port: Callable[[], Any], tolerance: Any, out: Optional[str],
                  steps: Optional[int], options: Dict[str, Any]) -> Localization:
    """localize() for a `kind` port: each run from a fresh port of the factory, `options` joined
    with its own (port_made)."""
    where = kind.package + ".localize"
    if "forcing" in options:
        raise UsageError("%s replays without forcing, then forced by state (and taps) itself: leave out forcing="
                         % where)

    def check(path: str, forcing: str, count: Optional[int]) -> Reported:
        holder, step, own = port_made(make_port, options)
        own.update(forcing=forcing, **({} if count is None else {"steps": count}))
        with open_trace(path) as trace:
            return plain(kind.run(trace, (holder, step, own), where).replay, trace, tolerance, False, None)

    def arbitrate(trace: Trace, state: Reported) -> None:
        arbitrate_local(trace, state, kind.arbiter(trace, lambda: port_made(make_port, options)))

    def script(path: str) -> Optional[str]:
        return write_script(path, make_port, tolerance, options, kind.package, kind.holder)
    return localize(golden, Localizing(check, arbitrate, script), out, steps)


def calibrate_port(kind: PortKind, golden: str, make_port: Callable[[], Any], runs: int, margin: float,
                   progress: Optional[Callable[[int, int], None]], options: Dict[str, Any]) -> Calibration:
    """calibrate() for a `kind` port: each replay from a fresh port of the factory."""
    check_calibration(runs, margin, options)

    def replay(path: str, out: str, seed: Optional[int]) -> Trace:
        holder, step, own = port_made(make_port, dict(options, progress=None))
        written = kind.run(path, (holder, step, own), kind.package + ".calibrate").replay(out, nudge=seed).trace
        assert written is not None  # written: out is given
        return written
    return calibrate(golden, replay, runs, margin, progress, kind.package + ".calibrate")
