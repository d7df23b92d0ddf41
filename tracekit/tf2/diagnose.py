"""tracekit.tf2.localize and tracekit.tf2.calibrate: the replays that find where a port first
computes differently, and that measure how far round-off carries a model's training (written
once for every framework, judge/diagnose.py; here how a TF2 port is run for them)."""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..comparison.calibration import DEFAULT_MARGIN
from ..comparison.tolerance import Tolerance
from ..judge import diagnose
from ..judge.reproduction import write_script
from ..replay.options import ReplayOptions
from ..report.calibration import Calibration
from ..report.localization import Localization
from ..report.reported import Reported
from ..store import Trace
from .drive import _CALIBRATE_SETS, _LOCALIZE_SETS, _made, _replay
from .live import _check, _port_runs
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

    def check(path: str, forcing: str, count: Optional[int]) -> Reported:
        _, step, own = _made(make_port, replay_options, _LOCALIZE_SETS)
        return _check(path, step, own.but(forcing=forcing, steps=count), tolerance=tolerance)

    def arbitrate(trace: Trace, state: Reported) -> None:
        arbitrate_local(trace, state, _port_runs(trace, None, make_port, tolerance, replay_options))

    def script(path: str) -> Optional[str]:
        return write_script(path, make_port, tolerance, replay_options.given())
    return diagnose.localize(golden, diagnose.Localizing(check, arbitrate, script), out, steps)


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
    diagnose.check_calibration(runs, margin, options)
    replay_options = ReplayOptions.of(options, "tracekit.tf2.calibrate", _CALIBRATE_SETS)

    def replay(path: str, out: str, seed: Optional[int]) -> Trace:
        _, step, own = _made(make_port, replay_options, _CALIBRATE_SETS)
        written = _replay(path, step, own, out, nudge=seed).trace
        assert written is not None  # written: out is given
        return written
    return diagnose.calibrate(golden, replay, runs, margin, progress)
