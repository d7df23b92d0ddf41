"""tracekit.tf2.localize and tracekit.tf2.calibrate: the replays that find where a port first
computes differently, and that measure how far round-off carries a model's training."""

from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Mapping, Optional

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
        arbitrate_local(trace, state, runs.make_port, runs.replay_one)
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
    found.script = _reproduction_script(found.reproduction, make_port, tolerance, replay_options.given())
    _, step, own = _made(make_port, replay_options, _LOCALIZE_SETS)
    found.reproduces = not _check(found.reproduction, step, own, tolerance=tolerance).ok
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


def _reproduction_script(reproduction: str, make_port: Any, tolerance: Any, options: Mapping[str, Any]) -> Optional[str]:
    """A script replaying the reproduction with the port, where make_port is importable by name.
    It passes on the tolerance (a Tolerance as a TOML file beside it), and the replay options
    that are plain values (random="none", steps, ...); it names the ones it cannot write (a
    var_map function)."""
    module, name = getattr(make_port, "__module__", None), getattr(make_port, "__qualname__", "")
    if not module or not name or "<" in name or module == "__main__":
        return None
    literal = {k: v for k, v in options.items() if isinstance(v, (str, int, float, bool, type(None)))}
    left_out = sorted(set(options) - set(literal))
    tolerance_code = repr(tolerance if isinstance(tolerance, str) else None)
    if isinstance(tolerance, Tolerance):  # written beside the script, which loads it
        policy = os.path.splitext(reproduction)[0] + ".tolerance.toml"
        with open(policy, "w", encoding="utf-8") as fh:
            fh.write(tolerance.to_toml())
        tolerance_code = "tracekit.Tolerance.load(%r)" % policy
    script = os.path.splitext(reproduction)[0] + ".py"
    with open(script, "w") as fh:
        fh.write('"""Replays one step of a golden where the port first computes differently (tracekit localize)."""\n'
                 "import tracekit\nimport tracekit.tf2\nfrom %s import %s\n\nmade = %s()\n%s"
                 "result = tracekit.tf2.check(%r, made[1], model=made[0], tolerance=%s%s,\n"
                 "                            **(made[2] if len(made) > 2 else {}))\nprint(result.report())\n"
                 "raise SystemExit(0 if result.ok else 1)\n"
                 % (module, name.split(".")[0], name,
                    "# localize also had %s: pass them here as it got them\n" % ", ".join(left_out) if left_out else "",
                    reproduction, tolerance_code,
                    "".join(", %s=%r" % kv for kv in sorted(literal.items()))))
    return script
