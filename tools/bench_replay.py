"""Replay benchmark: tracekit.tf2.replay against the plain training loop and the floor, in one run.

Data: the MLP goldens of tools/mlp_data.py (recorded on TF 1.15 in the legacy environment,
made on the first run under --data, as tools/bench_compare.py does) and the TF2 port
tools/ports/mlp.py, whose hand-written tf.function step every variant runs:

    .venv/bin/python tools/bench_replay.py [--data build/bench/mlp] [--repeat 3]

Variants, each in its own process, on the same golden (big: 20 steps of the 5.94M-parameter
MLP; small: the first 200 of the 784-128-10 one's 400 steps, where the per-step fixed cost shows):

    plain       the step alone on the golden's inputs (read and converted before timing)
    floor       the step, then what a full comparison must do besides comparing: read the step's
                values from the golden (inputs, gradients, variables, slots, ...) and copy out
                every variable, slot and gradient of the port (.numpy()); nothing written
    floor10     the floor's work on every 10th step, the plain step on the others: the least a
                replay capturing every 10th step (every=10) costs, its inputs aside
    inputs      the plain step on the golden's inputs read as a replay reads them, step by step on a
                thread while the step before runs (the floor of light: any replay reads them)
    inputs10    floor10, with every step's inputs read as `inputs` reads them: the floor of check10
    full        tracekit.tf2.replay, everything every step (writes the actual trace)
    every10     tracekit.tf2.replay(every=10)
    check       tracekit.tf2.check: the replay compared with the golden as it runs, nothing written
                (its ms/step include the comparison, which a replay leaves to compare())
    check10     tracekit.tf2.check(every=10)
    light       tracekit.tf2.check with only step 0 captured in full (every = the step count):
                the timed steps feed the golden's inputs and draws and compare loss and learning
                rate, so light - plain is what tracekit adds to every step (the fixed cost)

Prints seconds per step (the last steps, after tracing and warm-up), the ratios to the
plain loop and to the floor, and the fixed cost per step on the small MLP (replay minus
plain), best of --repeat with the spread; then the same from outside the loop: every step,
the model's building and tf.function tracing included (what a user's CI pays; the golden is
opened, and the plain loop's inputs read, before); and, with the small MLP, what reading a step's
inputs, draws and info costs with no model running, the golden as written (format 2: blocks of
steps) against a copy in format 1's layout (a step's attributes and datasets each), interleaved
in one run. A benchmark, not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from tools.bench_compare import HIDDEN, LEGACY, Runs, prepare  # noqa: E402

VARIANTS = ("plain", "floor", "floor10", "inputs", "inputs10", "full", "every10", "check", "check10", "light")
WARMUP = {"big": 3, "small": 50}  # steps left out of the timing: tracing, first allocations
STEPS = {"big": 20, "small": 200}  # steps replayed


def child(data: str, name: str, variant: str) -> Dict[str, Any]:
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import numpy as np
    import tensorflow as tf

    import tracekit
    import tracekit.tf2
    from tools.ports import mlp

    path = os.path.join(data, name + ".h5")
    stamps: List[float] = []
    with tracekit.open(path) as golden:
        count = min(len(golden), STEPS[name])
        start = time.perf_counter()  # from outside the loop: the model's building and tracing count
        if variant in ("full", "every10"):
            model, step = mlp.make(HIDDEN[name])
            out = os.path.join(data, "bench-replay-%s.h5" % os.getpid())
            try:
                tracekit.tf2.replay(golden, step, model=model, out=out, every=10 if variant == "every10" else 1, steps=count,
                                    progress=lambda done, total: stamps.append(time.perf_counter())).close()
            finally:
                if os.path.exists(out):
                    os.remove(out)
        elif variant in ("check", "check10", "light"):
            model, step = mlp.make(HIDDEN[name])
            every = {"check": 1, "check10": 10, "light": count}[variant]
            tracekit.tf2.check(golden, step, model=model, every=every, steps=count,
                               tolerance=tracekit.Tolerance.training(),
                               progress=lambda done, total: stamps.append(time.perf_counter()))
        else:
            ahead = variant in ("inputs", "inputs10")  # read anew, a step ahead on a thread, as the replay does
            feeds = _read_ahead(golden, count) if ahead else iter(
                [{n: golden.step(k)["input", n] for n in golden.step(k).names("input")} for k in range(count)])
            start = time.perf_counter()  # else the inputs read before: the plain loop has them in memory
            if variant in ("plain", "inputs"):
                _, step = mlp.make(HIDDEN[name])
            else:
                model, optimizer, floor_step = mlp.make_floor(HIDDEN[name])
                step = floor_step  # floor10's other steps: the same step, its gradients not copied out
            for k in range(count):
                fed = next(feeds)
                if variant in ("plain", "inputs") or (variant in ("floor10", "inputs10") and k % 10):
                    step({n: tf.constant(v) for n, v in fed.items()})
                else:  # floor: the golden's values read anew; the gradients, variables and slots copied out
                    g_step = golden.step(k)
                    if not ahead:
                        fed = {n: g_step["input", n] for n in g_step.names("input")}
                    _, grads = floor_step({n: tf.constant(v) for n, v in fed.items()})
                    copied = [g.numpy() for g in grads] + [np.asarray(v.numpy()) for v in model.variables]
                    copied += [np.asarray(v.numpy()) for v in optimizer.variables]
                    copied += [g_step[key] for key in g_step if not (ahead and key.startswith("input/"))]
                    del copied
                stamps.append(time.perf_counter())
    warm = WARMUP[name]
    return {"seconds_per_step": (stamps[-1] - stamps[warm - 1]) / (count - warm), "steps": count,
            "outside_per_step": (stamps[-1] - start) / count}


def _read_ahead(golden: Any, count: int) -> Any:
    """Each step's inputs as the replay reads them (tracekit.replay.loop._Ahead): step k + 1's
    read on a thread while step k runs."""
    import concurrent.futures

    def read(k: int) -> Dict[str, Any]:
        g_step = golden.step(k)
        return {n: g_step["input", n] for n in g_step.names("input")}

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        ahead = pool.submit(read, 0)
        for k in range(count):
            found = ahead.result()
            if k + 1 < count:
                ahead = pool.submit(read, k + 1)
            yield found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.path.join(ROOT, "build", "bench", "mlp"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default="big,small", help="which of big,small to run (default both)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    os.makedirs(args.data, exist_ok=True)
    models = [m for m in ("big", "small") if m in args.models.split(",")]
    if "big" in models:
        prepare(args.data)
    elif not os.path.exists(os.path.join(args.data, "small.h5")):  # the small golden alone (no replays needed)
        subprocess.run([LEGACY, os.path.join(HERE, "mlp_data.py"), "--out", args.data, "--only", "small"],
                       check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    runs: Dict[str, Runs] = {}
    outside: Dict[str, Runs] = {}  # the whole loop, building and tracing the model included
    for rep in range(args.repeat):  # interleaved, so drift hits every variant alike
        for name in models:
            for variant in VARIANTS:
                print("round %d of %d: %s %s ..." % (rep + 1, args.repeat, name, variant), file=sys.stderr)
                proc = subprocess.run([sys.executable, __file__, "--child", args.data, name, variant],
                                      stdout=subprocess.PIPE, check=True, cwd=ROOT, universal_newlines=True,
                                      env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2"))
                out = json.loads(proc.stdout.strip().splitlines()[-1])
                runs.setdefault("%s %s" % (name, variant), Runs()).add(out["seconds_per_step"])
                outside.setdefault("%s %s" % (name, variant), Runs()).add(out["outside_per_step"])
    best = {label: r.best(higher=False) for label, r in runs.items()}
    around = {label: r.best(higher=False) for label, r in outside.items()}
    _table(models, runs, args.repeat)
    print("\nper step beyond the plain loop, small MLP: %s" % ", ".join(
        "%s %.1f ms" % (v, 1e3 * (best["small " + v] - best["small plain"])) for v in VARIANTS[1:]))
    if "big" in models:
        print("every=10 against its floor, big MLP: every10 %.2fx, check10 %.2fx floor10 (floor10 itself %.2fx plain)"
              % (best["big every10"] / best["big floor10"], best["big check10"] / best["big floor10"],
                 best["big floor10"] / best["big plain"]))
    print("targets: fixed cost (light - plain) < 2 ms; big every10 <= 1.2x plain; big full capture <= 1.15x floor "
          "(%d CPUs)" % (os.cpu_count() or 0))
    print("\nFrom outside the loop (the model built and traced inside the timing; ms/step over every step):")
    _table(models, outside, args.repeat)
    print("targets from outside: small check10 <= 1.3x plain (%.2fx); full capture <= 1.15x its floor: small check "
          "%.2fx%s" % (around["small check10"] / around["small plain"], around["small check"] / around["small floor"],
                       ", big check %.2fx" % (around["big check"] / around["big floor"]) if "big" in models else ""))
    print("the floors with the inputs read as a replay reads them, small MLP: inputs %.2fx plain (light %.2fx it), "
          "inputs10 %.2fx plain (check10 %.2fx it)"
          % tuple(around["small " + a] / around["small " + b] for a, b in
                  (("inputs", "plain"), ("light", "inputs"), ("inputs10", "plain"), ("check10", "inputs10"))))
    if "small" in models:
        read = reading(args.data, args.repeat)
        two, one = read["format 2"].best(higher=False), read["format 1"].best(higher=False)
        print("reading a step's inputs, draws and info, no model running (small MLP, best of %d): format 2 %.3f ms "
              "(spread %.0f%%), format 1 %.3f ms (spread %.0f%%): %.2fx; the plain step itself %.3f ms"
              % (args.repeat, 1e3 * two, 100 * read["format 2"].spread(), 1e3 * one, 100 * read["format 1"].spread(),
                 two / one, 1e3 * best["small plain"]))


def reading(data: str, repeat: int) -> Dict[str, Runs]:
    """Seconds a step to read what a replay reads at every step (its inputs, draws and info, as
    tracekit.replay.loop._Ahead does), no model running: the small golden as written (format 2)
    and a copy in format 1's layout (tools/format1.py), interleaved in one process."""
    import shutil
    import tempfile

    import tracekit
    from tools.format1 import as_format1

    count = STEPS["small"]
    work = tempfile.mkdtemp()
    try:
        paths = {"format 2": os.path.join(data, "small.h5"), "format 1": os.path.join(work, "small-format1.h5")}
        shutil.copyfile(paths["format 2"], paths["format 1"])
        as_format1(paths["format 1"])
        out: Dict[str, Runs] = {}
        for _ in range(repeat):
            for label, path in paths.items():
                with tracekit.open(path) as golden:
                    start = time.perf_counter()
                    for k in range(count):
                        step = golden.step(k)
                        _ = ({n: step["input", n] for n in step.names("input")},
                             [step["random", n] for n in step.names("random")], step.info)
                    out.setdefault(label, Runs()).add((time.perf_counter() - start) / count)
        return out
    finally:
        shutil.rmtree(work)


def _table(models: List[str], runs: Dict[str, Runs], repeat: int) -> None:
    """The markdown table of the variants' best ms/step, against plain and the floor."""
    best = {label: r.best(higher=False) for label, r in runs.items()}
    print("\n| model | variant | ms/step | vs plain | vs floor | spread over %d runs |" % repeat)
    print("|---|---|---|---|---|---|")
    for name in models:
        for variant in VARIANTS:
            label = "%s %s" % (name, variant)
            print("| %s | %s | %.2f | %.2fx | %.2fx | %.0f%% |" % (
                name, variant, 1e3 * best[label], best[label] / best[name + " plain"],
                best[label] / best[name + " floor"], 100 * runs[label].spread()))


if __name__ == "__main__":
    main()
