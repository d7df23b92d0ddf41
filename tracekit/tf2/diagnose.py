"""tracekit.tf2.localize and tracekit.tf2.calibrate: the replays that find where a port first
computes differently, and that measure how far round-off carries a model's training."""

from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Optional

from ..comparison.calibration import DEFAULT_MARGIN, Spread, derive
from ..comparison.tolerance import Tolerance
from ..errors import UsageError
from ..replay.options import ReplayOptions
from ..report.calibration import Calibration
from ..report.localization import Localization
from ..report.reported import Reported, compare
from ..store import Trace, open_trace
from ..store.excerpt import write_excerpt
from .drive import _CALIBRATE_SETS, _LOCALIZE_SETS, _made, _replay
from .live import _check, _port_runs
from .reproduction import reproduces, write_script
from .verdict import arbitrate_local

def localize(golden: str, make_port: Callable[[], Any], *, tolerance: "Tolerance | str | None" = None,
             out: Optional[str] = None, steps: Optional[int] = None, **options: Any) -> Localization:
    """Find the first step whose own (local) error exceeds the tolerance, and the first stage and
    tensor inside it, and write a one-step reproduction of it.

    make_port() returns a fresh (model, step function) each time it is called, or (model, step
    function, {replay option: value}) for options that name the port's objects (convert=,
    variables=). The port runs from its own state (replay's default); if it fails, again with
    forcing="state" (each step from the golden's state), whose failing steps the float64 arbiter
    judges (tf2/verdict.py): those it explains as round-off through a discontinuity are
    accepted, and the first it does not is the first local error; where the golden has taps, the steps up to it once more with forcing="taps",
    which names the first layer at fault. The reproduction is a golden of that one step
    (store/excerpt.py) written under `out` (a new temporary directory by default), with a
    script that replays it when make_port is importable by name; it is replayed once to check
    that it fails. `options` go to every replay (var_map, convert, inputs, ...); tolerance as
    for tracekit.compare."""
    replay_options = ReplayOptions.of(options, "tracekit.tf2.localize", _LOCALIZE_SETS)

    def run(forcing: str, count: Optional[int]) -> Reported:
        _, step, own = _made(make_port, replay_options, _LOCALIZE_SETS)
        return _check(golden, step, own.but(forcing=forcing, steps=count), tolerance=tolerance)
    plain = run("none", steps)
    if plain.ok:
        return Localization(golden, plain, plain)
    state = run("state", steps)
    with open_trace(golden) as trace:
        runs = _port_runs(trace, None, make_port, tolerance, replay_options)
        arbitrate_local(trace, state, runs)
    found = Localization(golden, plain, state)
    first = state.first_divergence
    if first is None:
        return found  # only drift, or the replay is short or misses tensors: the reports say which
    found.step, found.key = first.step, first.key
    with open_trace(golden) as trace:
        has_taps = bool(trace.names("tap"))
        if first.step < 0:
            return found  # the initial state differs: the variables as loaded, no step to reproduce
        if has_taps:
            found.taps = run("taps", first.step + 1)
            tapped = found.taps.first_divergence
            if tapped is not None and tapped.step == first.step:
                found.key = tapped.key
        folder = out or tempfile.mkdtemp(prefix="tracekit-localize-")
        os.makedirs(folder, exist_ok=True)
        stem = os.path.splitext(os.path.basename(trace.path))[0]
        found.reproduction = write_excerpt(trace, first.step, os.path.join(folder, "%s-step%d.h5" % (stem, first.step)))
    found.script = write_script(found.reproduction, make_port, tolerance, replay_options.given())
    _, step, own = _made(make_port, replay_options, _LOCALIZE_SETS)
    found.reproduces, found.reproduced = reproduces(found.reproduction, _check(found.reproduction, step, own,
                                                                              tolerance=tolerance), state)
    return found


def calibrate(golden: str, make_port: Callable[[], Any], *, runs: int = 4, margin: float = DEFAULT_MARGIN,
              progress: Optional[Callable[[int, int], None]] = None, **options: Any) -> Calibration:
    """Measure how much this model's training amplifies round-off and return a tolerance that
    covers it (comparison/calibration.py says how it is derived).

    make_port() returns a fresh (model, step function) each time it is called (or a third item,
    replay options naming the port's objects, as for localize). The port is replayed once as
    it is, then `runs` more times, each from a start moved one ulp up or down at random in
    every nonzero element (seeds 0..runs-1: the result is reproducible on one machine). Step 0
    keeps the default tolerance; from step 1, per tensor and band of steps, the largest
    deviation of those runs from the first, times `margin`, rounded up to a power of two,
    becomes a rule where it exceeds the floor (the training profile). No rule exceeds the cap
    (1/64 of a float32 tensor's scale): a tensor that would need more is listed as refused,
    and the tolerance then accepts failures the noise analysis explains (accept_noise). The
    result holds the tolerance (`.tolerance`, `.save(path)` as TOML) and the first replay
    compared with the golden under it (`.port`, `.ok`). progress(done, runs + 1) as the
    replays finish; `options` go to every replay (var_map, convert, inputs, steps, ...)."""
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise UsageError("runs must be a whole number of replays, at least 1, got %r" % (runs,))
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 1 <= margin < float("inf"):
        raise UsageError("margin must be a finite number >= 1 (the factor over the largest deviation seen), got %r"
                         % (margin,))
    if "forcing" in options:
        raise UsageError("calibrate measures how training carries round-off from step to step: it replays without "
                         "forcing, got forcing=%r" % (options["forcing"],))
    replay_options = ReplayOptions.of(options, "tracekit.tf2.calibrate", _CALIBRATE_SETS)

    def run(seed: Optional[int], path: str) -> Trace:
        _, step, own = _made(make_port, replay_options, _CALIBRATE_SETS)
        written = _replay(golden, step, own, path, nudge=seed).trace
        assert written is not None  # written: out is given
        return written

    spread = Spread()
    with tempfile.TemporaryDirectory(prefix="tracekit-calibrate-") as folder:
        with run(None, os.path.join(folder, "unperturbed.h5")) as base:
            for seed in range(runs):
                if progress is not None:
                    progress(seed + 1, runs + 1)
                with run(seed, os.path.join(folder, "nudged-%d.h5" % seed)) as nudged:
                    spread.add(compare(base, nudged, Tolerance.exact()))
            derived = derive(spread, margin)
            port = compare(golden, base, derived.tolerance)
            if progress is not None:
                progress(runs + 1, runs + 1)
    return Calibration(golden, float(margin), spread, derived, port)
