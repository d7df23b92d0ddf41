"""tracekit check, map, localize and calibrate: a TF2 port (MODULE:FUNCTION) replayed against its golden."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict

from ..comparison.arbiter import LONG_GOLDEN
from ..comparison.calibration import DEFAULT_MARGIN
from ..report.terminal import Progress
from .common import EXIT_FAIL, EXIT_OK, Command, framework_of, port, read_tolerance, tolerance_options


def add(command: Command) -> None:
    def porting(p: argparse.ArgumentParser) -> None:
        p.add_argument("golden", metavar="GOLDEN", help="the golden trace")
        p.add_argument("port", metavar="MODULE:FUNCTION",
                       help="the port: FUNCTION() in MODULE (importable from here) returns a fresh (model, step "
                            "function), or (model, step function, {replay option: value})")

    p = command("calibrate", _calibrate, "Measure how much a model's training amplifies round-off and write a "
                                         "tolerance that covers it: replay the port once as it is and --runs times "
                                         "from a start moved one ulp, per tensor and band of steps take the largest "
                                         "deviation times --margin where it exceeds the training profile's floor, "
                                         "never past the cap (1/64 of a tensor's scale: such tensors are listed and "
                                         "left to the noise analysis). Writes the TOML tolerance; exit 0 when the "
                                         "port passes under it, 1 when not. Needs TensorFlow 2.")
    porting(p)
    p.add_argument("--runs", type=int, default=4, metavar="N", help="replays from a perturbed start (default 4)")
    p.add_argument("--margin", type=float, default=DEFAULT_MARGIN, metavar="M",
                   help="the factor over the largest deviation seen (default %g)" % DEFAULT_MARGIN)
    p.add_argument("--steps", type=int, metavar="N", help="replay only the first N steps")
    p.add_argument("-o", "--output", metavar="FILE.toml",
                   help="where to write the tolerance (default: GOLDEN's name with .tolerance.toml)")
    p.add_argument("--json", action="store_true", help="print what was measured and derived as JSON")

    p = command("check", _check, "Replay a TF2 or PyTorch port against its golden and judge it. A TF2 port's golden "
                                 "longer than %d steps is judged by each step's own error (teacher-forced), the steps "
                                 "that fail judged by the float64 arbiter (round-off through a ReLU, max-pooling or "
                                 "threshold is not a port error), and the port's drift against an envelope of "
                                 "perturbed replays; a shorter one, and a PyTorch port's, as the replay runs. Exit 0 "
                                 "on a match, 1 on a mismatch. Needs TensorFlow 2, or PyTorch for a PyTorch port "
                                 "(FUNCTION returns (model, step, {\"optimizer\": ...}))." % LONG_GOLDEN)
    porting(p)
    p.add_argument("--judge", choices=("auto", "plain", "local"), default="auto",
                   help="auto (local for long goldens), plain (the replay as it runs) or local")
    p.add_argument("--steps", type=int, metavar="N", help="replay only the first N steps")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON (without per-step statistics)")
    p.add_argument("--html", metavar="FILE", help="also write the HTML report (needs matplotlib)")
    tolerance_options(p)

    p = command("map", _map, "Pair a TF2 port's variables (and its hand-written optimizer's state) with its golden's "
                             "as a replay would, without replaying: print each pairing and the rule that made it; "
                             "where some do not pair, print both sides and a var_map to start from (a dict to "
                             "check and paste: transposes and None where needed, a comment per line saying why). "
                             "Exit 0 when every variable pairs, 1 when not. Needs TensorFlow 2.")
    porting(p)

    p = command("localize", _localize, "Find where a TF2 port first computes differently from its golden: replay it, "
                                       "then with each step started from the golden's state (forcing='state') and "
                                       "with each tap handed the golden's value (forcing='taps'); print the first "
                                       "step whose own error exceeds the tolerance, the first tensor in it, and write "
                                       "a one-step reproduction (a golden of that step and a script replaying it). "
                                       "Exit 0 when no step does, 1 when one does. Needs TensorFlow 2.")
    porting(p)
    p.add_argument("--out", metavar="DIR", help="where to write the reproduction (default: a new temporary directory)")
    p.add_argument("--steps", type=int, metavar="N", help="replay only the first N steps")
    p.add_argument("--json", action="store_true", help="print the finding as JSON (the three comparisons included)")
    p.add_argument("--html", metavar="FILE", help="also write the HTML report, each step's own error beside the "
                                                  "accumulated one (needs matplotlib)")
    tolerance_options(p)


def _check(args: argparse.Namespace) -> int:
    make_port = port(args.port)
    options = {} if args.steps is None else {"steps": args.steps}
    framework = framework_of(make_port)
    if framework == "torch":
        import tracekit.torch  # PyTorch: a PyTorch port's check needs it, and no TensorFlow

        result = tracekit.torch.check(args.golden, make_port=make_port, tolerance=read_tolerance(args),
                                      judge=args.judge, **options)
    elif framework == "jax":
        import tracekit.jax  # JAX: a JAX port's check needs it, and no TensorFlow

        result = tracekit.jax.check(args.golden, make_port=make_port, tolerance=read_tolerance(args),
                                    judge=args.judge, **options)
    else:
        import tracekit.tf2  # TensorFlow: only this command needs it

        result = tracekit.tf2.check(args.golden, make_port=make_port, tolerance=read_tolerance(args),
                                    judge=args.judge, **options)
    return _shown(result, args, result.to_dict(by_step=False))


def _map(args: argparse.Namespace) -> int:
    make_port = port(args.port)
    from ..tf2.mapping import map_port  # TensorFlow: only this command needs it

    found = map_port(args.golden, make_port)
    print(found.text)
    return EXIT_OK if found.ok else EXIT_FAIL


def _localize(args: argparse.Namespace) -> int:
    make_port = port(args.port)
    import tracekit.tf2  # TensorFlow: only this command needs it

    if args.html:
        from ..report.plots import pyplot

        pyplot()  # without matplotlib, say so before the replays
    found = tracekit.tf2.localize(args.golden, make_port, tolerance=read_tolerance(args), out=args.out, steps=args.steps)
    return _shown(found, args, found.to_dict())


def _calibrate(args: argparse.Namespace) -> int:
    from ..report.calibration import default_path

    make_port = port(args.port)
    import tracekit.tf2  # TensorFlow: only this command needs it

    with Progress("calibrating %s" % args.golden, unit="replays") as progress:
        found = tracekit.tf2.calibrate(args.golden, make_port, runs=args.runs, margin=args.margin,
                                       progress=progress, steps=args.steps)
    path = found.save(args.output or default_path(args.golden))
    print(json.dumps(found.to_dict(), indent=1, allow_nan=False) if args.json else found.report())
    print("wrote %s (tracekit diff --tolerance %s)" % (path, path), file=sys.stderr)
    return EXIT_OK if found.ok else EXIT_FAIL


def _shown(found: Any, args: argparse.Namespace, as_dict: Dict[str, Any]) -> int:
    """Print a verdict (as JSON with --json), write its HTML page with --html; its exit code."""
    print(json.dumps(as_dict, indent=1, allow_nan=False) if args.json else found.report())
    if args.html:
        found.write_html(args.html)
        print("wrote %s" % args.html, file=sys.stderr)
    return EXIT_OK if found.ok else EXIT_FAIL
