"""Record the corpus programs in the legacy environment and replay them through their ports:

    .venv/bin/python -m tools.corpus                 # every program (those CI runs and the slow ones)
    .venv/bin/python -m tools.corpus sonnet_mlp      # one
    .venv/bin/python -m tools.corpus --markdown      # the table of docs/CORPUS.md
    .venv/bin/python -m tools.corpus sonnet_mlp --golden G.h5   # replay a recording of it

Prints, per program: the package, record time, golden size, port size and the verdict at the
default tolerance (MATCH, or the first divergence)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from tools.corpus import PROGRAMS, by_name, port_lines, record, replay, step_loss  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="programs to run (default: all)")
    parser.add_argument("--legacy-python", help="the interpreter to record with (default: each program's own "
                                                "legacy environment)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--golden", metavar="PATH", help="replay this recording of the one program named instead "
                                                         "of recording it (the tests replay under other kernels so)")
    args = parser.parse_args()
    if args.golden:
        if len(args.names) != 1 or not by_name(args.names[0]).ported:
            parser.error("--golden replays one ported program: name it")
        result = replay(by_name(args.names[0]), args.golden)
        print("MATCH" if result.ok else result.report())
        return 0 if result.ok else 1
    programs = [by_name(n) for n in args.names] or list(PROGRAMS)
    rows, failed = [], 0
    for program in programs:
        with tempfile.TemporaryDirectory(prefix="tracekit-corpus-") as where:
            golden = os.path.join(where, program.name + ".h5")
            recorded = record(program, args.legacy_python or program.python(ROOT), golden, os.path.join(where, "work"))
            seconds = recorded.seconds
            if program.ported:
                result = replay(program, golden)
                verdict = "MATCH" if result.ok else "first divergence: step %s, %s" % (
                    result.first_divergence.step if result.first_divergence else "?",
                    result.first_divergence.key if result.first_divergence else "; ".join(result.missing[:2]))
                failed += not result.ok
            else:
                verdict = "no port"
            if program.prints_loss:  # the golden's loss against the program's own totals
                held = _held(golden, recorded.losses())
                failed += not held
                verdict += "; loss %s the program's at every step" % ("equal to" if held else "NOT EQUAL TO")
            lines = ("%d lines" % port_lines(program)) if program.ported else "-"
            rows.append((program.name, program.package, "%.1f s" % seconds,
                         "%.1f KiB" % (os.path.getsize(golden) / 1024), lines, verdict))
        print("%-22s %s" % (program.name, rows[-1][-1]), file=sys.stderr, flush=True)
    if args.markdown:
        print("| program | package | record | golden | port | verdict |\n|---|---|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        for row in rows:
            print("  ".join(row))
    return 1 if failed else 0


def _held(golden: str, printed: tuple) -> bool:
    import numpy as np

    import tracekit

    with tracekit.open(golden) as trace:
        recorded = [step_loss(step) for step in trace]
    return len(recorded) == len(printed) > 0 and bool(np.allclose(recorded, printed, rtol=1e-6, atol=1e-6))


if __name__ == "__main__":
    sys.exit(main())
