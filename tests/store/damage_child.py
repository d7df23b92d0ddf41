"""Damage a trace in many ways and classify what tracekit makes of each copy.

    python -m tests.store.damage_child TRACE SEED CASES
Prints one line per case: "<case> <outcome> <detail>". Outcomes that are fine:
  unreadable   open() raised a TracekitError
  reported     verify() or a read reported the damage (TracekitError), or steps went missing
               (a damaged journal record ends an unfinished trace early)
  intact       everything verifies and reads back identical (damage in unused bytes)
Outcomes that are bugs: "silent" (a value changed and nothing noticed) and
"crash" (some other exception). A hang is caught by the parent's timeout.
The trace must have been written by tests.support.write_steps.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
import traceback

import tracekit
from tests.support import payloads


def expected_values(step):
    return payloads.initial_values() if step == -1 else payloads.step_values(step)


def classify(path, baseline):
    try:
        trace = tracekit.open(path)
    except tracekit.TracekitError as exc:
        return "unreadable", type(exc).__name__
    problems = []
    with trace:
        if len(trace) < baseline:  # a damaged journal record ends the readable steps early
            problems.append("%d of %d steps" % (len(trace), baseline))
        steps = ([trace.initial] if trace.has_initial else []) + list(trace)
        for step in steps:
            try:
                keys = list(step)
            except tracekit.TracekitError as exc:
                problems.append(type(exc).__name__)
                continue
            expected = expected_values(step.index)
            for key in keys:
                try:
                    value = step[key]
                except tracekit.TracekitError as exc:
                    problems.append(type(exc).__name__)
                    continue
                if key not in expected or not payloads.same(expected[key], value):
                    return "silent", "step %d %s" % (step.index, key)
    try:
        result = tracekit.verify(path)
    except tracekit.TracekitError as exc:
        return "reported", type(exc).__name__
    damage = result.problems[0 if result.complete else 1:]  # an unfinished trace says so first
    if problems or damage:
        return "reported", (problems or damage)[0][:80]
    return "intact", ""


def main():
    source, seed, cases = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    journal = source + ".journal"  # an interrupted recording: damage its data or its journal
    with tracekit.open(source) as original:
        baseline = len(original)
    work = tempfile.mkdtemp()
    try:
        for case in range(cases):
            path = os.path.join(work, "damaged%d.h5" % case)
            if os.path.exists(journal):
                shutil.copyfile(source + ".partial", path + ".partial")
                shutil.copyfile(journal, path + ".journal")
                victim = rng.choice([path + ".partial", path + ".journal"])
            else:
                shutil.copyfile(source, path)
                victim = path
            size = os.path.getsize(victim)
            if case % 3 == 0:
                cut = rng.randrange(size)
                with open(victim, "r+b") as fh:
                    fh.truncate(cut)
                label = "truncate@%d" % cut
            else:
                at = rng.randrange(size)
                with open(victim, "r+b") as fh:
                    fh.seek(at)
                    byte = fh.read(1)
                    fh.seek(at)
                    fh.write(bytes([byte[0] ^ (1 << rng.randrange(8))]))
                label = "flip@%d" % at
            label += "(journal)" if victim.endswith(".journal") else ""
            try:
                outcome, detail = classify(path, baseline)
            except Exception:
                outcome, detail = "crash", traceback.format_exc().replace("\n", " | ")
            print("%s %s %s" % (label, outcome, detail), flush=True)
            for leftover in (path, path + ".partial", path + ".journal"):
                if os.path.exists(leftover):
                    os.remove(leftover)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
