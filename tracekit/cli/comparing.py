"""tracekit diff and report: a replayed trace against its golden."""

from __future__ import annotations

import argparse
import json

from ..comparison.arbiter import LONG_GOLDEN
from ..report.judged import long_golden_advice
from ..report.terminal import GREEN, RED, Progress, colour
from ..store.meta import replay_of
from .common import EXIT_FAIL, EXIT_OK, Command, meta, read_tolerance, terminal_width, tolerance_options


def add(command: Command) -> None:
    def comparing(p: argparse.ArgumentParser) -> None:
        p.add_argument("golden", metavar="GOLDEN", help="the golden trace (a path or a URL)")
        p.add_argument("actual", metavar="ACTUAL", help="the replayed trace (tracekit.tf2.replay(...).save(path))")
        tolerance_options(
            p, file_help="a TOML tolerance policy: atol, rtol, equal_nan and [[rule]] tables with kind, name (glob, "
                         "or re:regex), steps = [start, stop] or [start], atol, rtol, equal_nan, ignore",
            profile_help="the tolerance without --tolerance. auto (the default) picks from the two traces: default "
                         "(float32 atol=1e-5, rtol=1e-6) for a replayed port or another TensorFlow; for two runs of "
                         "the same code, exact when nothing that selects kernels differs, else round-off, the "
                         "cross-machine bound (docs/NUMERICS.md). training: step 0 at the default, later steps also "
                         "allowing a port's measured round-off growth (Tolerance.training()). auto also picks "
                         "mixed-precision for a port under mixed_float16 and gpu for a port on a GPU "
                         "(docs/DISTRIBUTE.md)")

    p = command("diff", _diff, "Compare a replayed trace with its golden: per-tensor statistics and the first "
                               "step, stage and tensor that diverge.")
    comparing(p)
    p.add_argument("--json", action="store_true",
                   help="print the comparison as JSON (result.to_dict(): verdict, first divergence, environment "
                        "difference, per-tensor statistics at every step) instead of the text report")
    p.add_argument("--no-steps", action="store_true", help="with --json: leave out the per-step statistics")
    p.add_argument("--kind", action="append", metavar="KIND",
                   help="show only tensors of this kind (input, random, tap, fetch, loss, lr, grad, var, slot); "
                        "repeat for several. Filters narrow the table and the JSON, not the verdict")
    p.add_argument("--name", metavar="GLOB", help="show only tensors whose name matches (a glob, or re:REGEX)")
    p.add_argument("--step", metavar="STEPS", help="show only these steps: N, START:STOP (stop excluded), START:, "
                                                   ":STOP; 'initial' is the initial state")

    p = command("report", _report, "Compare a replayed trace with its golden and write the comparison as one "
                                   "self-contained HTML page: verdict, first divergence, environment difference, "
                                   "loss and learning-rate curves of both runs, errors per kind against step, a "
                                   "tensor x step heatmap, error against magnitude, the per-tensor table. Needs "
                                   "matplotlib (pip install 'tracekit[report]').")
    comparing(p)
    p.add_argument("-o", "--output", required=True, metavar="OUT.html", help="the page to write")


def _diff(args: argparse.Namespace) -> int:
    from ..comparison.select import Selection, parse_steps
    from ..report.reported import compare

    selection = Selection(tuple(args.kind or ()), args.name, None if args.step is None else parse_steps(args.step))
    with Progress("comparing %s" % args.actual) as progress:
        result = compare(args.golden, args.actual, read_tolerance(args), progress=progress)
    replay = result.golden_steps > LONG_GOLDEN and not result.ok and result.forcing == "none"
    if replay and replay_of(meta(args.actual)) is not None:
        result.advice = long_golden_advice(result.golden_steps)
    if args.json:
        print(json.dumps(result.to_dict(by_step=not args.no_steps, selection=selection), indent=1, allow_nan=False))
    else:
        text = result.report(selection, terminal_width())
        word = text.split(" ", 1)[0]
        print(colour(word, GREEN if result.ok else RED) + text[len(word):])
    return EXIT_OK if result.ok else EXIT_FAIL


def _report(args: argparse.Namespace) -> int:
    from ..report.plots import pyplot
    from ..report.reported import compare

    pyplot()  # without matplotlib, say how to install it before a long comparison, not after
    with Progress("comparing %s" % args.actual) as progress:
        result = compare(args.golden, args.actual, read_tolerance(args), progress=progress)
    result.write_html(args.output)
    print("wrote %s: %s" % (args.output, "MATCH" if result.ok else "MISMATCH (the page shows where and why)"))
    return EXIT_OK if result.ok else EXIT_FAIL
