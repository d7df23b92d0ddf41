"""tracekit record (a TF1 script into a golden) and tracekit env (this machine's fingerprint)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from ..report.terminal import Progress
from ..report.trace import warning_lines
from .common import EXIT_OK, EXIT_WARNED, Command


def add(command: Command) -> None:
    p = command("record", _record, "Run an unmodified TF1 training script and record every training step it "
                                   "runs into a golden (needs TensorFlow: the legacy environment, or TF 2 "
                                   "tf.compat.v1 code).")
    p.add_argument("-o", "--output", required=True, metavar="OUT.h5", help="the golden to write")
    p.add_argument("--seed", type=int, help="graph seed to set before the script builds its graph")
    p.add_argument("--seed-mode", choices=["constant", "num_random_ops"],
                   help="control every random op's seeds like tf.compat.v1.keras.utils.DeterministicRandomTestTool")
    p.add_argument("--every", type=int, default=1, metavar="K",
                   help="keep gradients, taps and variables whole every K-th step and at the last (with --steps), "
                        "as digests (statistics and a fixed sample) in between; inputs, random draws, loss and "
                        "learning rate whole at every step. Default 1")
    p.add_argument("--no-digests", action="store_true",
                   help="with --every K: keep nothing of gradients, taps and variables between keyframes")
    p.add_argument("--budget", metavar="SIZE",
                   help="keep the golden under SIZE (500MB, 2GiB): keyframe spacing and what keyframes keep "
                        "are chosen for it at the first step and stored in the golden; without --steps, as the "
                        "run goes (keyframes thin out as it grows, and the recording ends where the budget holds "
                        "no more steps)")
    p.add_argument("--steps", type=int, metavar="N", help="stop the script after N recorded steps")
    p.add_argument("--loss", action="append", metavar="NAME",
                   help="the loss tensor, where the recorder picks another (graph name, e.g. total_loss:0)")
    p.add_argument("--learning-rate", action="append", metavar="NAME",
                   help="a learning-rate tensor the recorder does not find (repeatable)")
    p.add_argument("--train-op", action="append", metavar="NAME",
                   help="an op whose runs are training steps although the recorder does not see them train "
                        "(repeatable)")
    p.add_argument("--gradient", action="append", metavar="VAR=TENSOR",
                   help="a variable's gradient, where a step computes it by hand (repeatable)")
    p.add_argument("--loss-parts", action="store_true",
                   help="also record the parts of a loss that is a sum (a coefficient times each part), so a "
                        "replay can name a slip in one of them; fetching them may change how TensorFlow sums the "
                        "loss, by an ulp")
    p.add_argument("--worker", type=int, metavar="N",
                   help="parameter-server training: record the steps of worker task N (runs placed on "
                        "/job:worker/task:N); default: the first graph that trains")
    p.add_argument("--strict", action="store_true",
                   help="exit 3 when the golden carries warnings (a gradient or learning rate not found, a "
                        "race, steps that record no input): the golden is written all the same")
    p.add_argument("script", nargs=argparse.REMAINDER, metavar="-- script.py ARGS",
                   help="the script and its arguments (or -m module ARGS)")

    p = command("env", _env, "Print this machine's environment fingerprint, as a trace recorded here would "
                             "store it: CPU instruction sets, oneDNN, threads, XLA, determinism, TF32, devices.")
    p.add_argument("--json", action="store_true", help="as JSON")
    p.add_argument("--no-tensorflow", action="store_true",
                   help="do not import TensorFlow (faster; leaves out what only TensorFlow can tell)")


def _record(args: argparse.Namespace) -> int:
    from ..store.remote import refuse_url
    from ..store.writable import check_path

    refuse_url(args.output, "record a golden")
    check_path(args.output)  # before TensorFlow is imported and the script trains
    if args.budget is not None:
        from ..record.keyframes import parse_size

        parse_size(args.budget)
    from ..record.declared import Declared
    from ..record.launch import run_script  # imports TensorFlow: only this command needs it

    script = list(args.script)
    if script and script[0] == "--":
        script = script[1:]
    declared = Declared.of(args.loss, args.learning_rate, args.train_op, args.gradient)
    logging.getLogger("tracekit.record").setLevel(logging.ERROR)  # its warnings are printed below, once
    with Progress("recording %s" % args.output) as progress:
        code, warnings = run_script(script, args.output, seed=args.seed, seed_mode=args.seed_mode, every=args.every,
                          steps=args.steps, progress=progress, declared=declared, worker=args.worker,
                          budget=args.budget, digests=not args.no_digests, loss_parts=args.loss_parts)
    print("recorded %s" % args.output, file=sys.stderr)
    for line in warning_lines(args.output, warnings):
        print(line, file=sys.stderr)
    if warnings and args.strict and code == 0:
        return EXIT_WARNED
    return code


def _env(args: argparse.Namespace) -> int:
    from ..environment import fingerprint
    from ..tf_environment import tensorflow_environment
    from ..report.environment import fingerprint_text

    meta: dict = {}
    if not args.no_tensorflow:
        try:
            os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # as the replayer: tf-keras on TF >= 2.16
            import tensorflow as tf  # the settings only the running TensorFlow can tell
        except ImportError:
            print("tracekit env: TensorFlow is not installed here; showing the machine only", file=sys.stderr)
        else:
            meta["tensorflow"] = tensorflow_environment(tf)
    meta["environment"] = fingerprint()  # after the import: the versions it loaded, the variables it set
    print(json.dumps(meta, indent=2, sort_keys=True, default=str) if args.json else fingerprint_text(meta))
    return EXIT_OK
