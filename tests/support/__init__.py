"""Helpers the tests share: paths, child interpreters, the shipped goldens, a synthetic
golden. conftest modules hold fixtures only; tests import helpers from here. Runs in both
environments (Python 3.7 syntax)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDENS = os.path.join(ROOT, "goldens")
FOREIGN_GOLDENS = os.path.join(ROOT, "tests", "data", "foreign_cpu")  # the same, from another machine
LEGACY_PYTHON = os.path.join(ROOT, ".venv-legacy", "bin", "python")
# On PYTHONPATH with TRACEKIT_PLANT="VARIABLE@K": a recording whose step K of that variable is not its update's
PLANT = os.path.join(ROOT, "tests", "support", "plant")
IS_LEGACY = sys.version_info < (3, 8)


# The generated family's runs every framework's ports replay (the ported_family fixture), shorter
# than its own lengths (200 to 400 steps: tools/family.py, and LONG_STEPS below).
PORTED_FAMILY, PORTED_STEPS = 8, 40
LONG_FAMILY, LONG_STEPS = 2, 200  # and at full length (long_ported_family)


def record_family(legacy_python, out, size, steps, every=None):
    """Record the generated family's first `size` runs, `steps` steps each, on TF 1.15 into `out`
    (tools/goldens/family.py; every=K: the state whole after every K-th step, digests between)."""
    run_python(legacy_python, [os.path.join(ROOT, "tools", "goldens", "family.py"), out, "--size", str(size),
                               "--steps", str(steps)] + (["--every", str(every)] if every else []), timeout=600)
    return out


def once(tmp_path_factory, name, make):
    """make(folder)'s value, made once per test run in a folder every pytest-xdist worker of the
    run shares (a recording on TF 1.15 that tests on both workers read): the first worker to ask
    makes it under a lock, the others wait and read its value (JSON: a path, a list). A folder a
    failed or killed maker left is made again."""
    import fcntl

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's, not the worker's
    folder, done = os.path.join(str(shared), "once-" + name), os.path.join(str(shared), "once-%s.json" % name)
    with open(folder + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(done):
            shutil.rmtree(folder, ignore_errors=True)
            os.makedirs(folder)
            value = make(folder)
            with open(done, "w") as f:
                json.dump(value, f)
        with open(done) as f:
            return json.load(f)


def golden(name):
    """The path of a shipped golden: golden("seed_example")."""
    return os.path.join(GOLDENS, name + ".h5")


def run_python(python, code_or_args, timeout=300, env=None, check=True, unset=(), cwd=ROOT):
    """Run a Python child (this interpreter or the legacy one) in `cwd`, with `env` added to this
    process's environment and the variables in `unset` removed; returns CompletedProcess."""
    args = [python] + (["-c", code_or_args] if isinstance(code_or_args, str) else list(code_or_args))
    full_env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    if os.path.realpath(python) != os.path.realpath(sys.executable):
        # TF 2 sets TF2_BEHAVIOR=1 when it is imported; TF 1.15 would then give the legacy child
        # TF 2's resource variables and control flow, not the program's own TF1 behaviour
        full_env.pop("TF2_BEHAVIOR", None)
        # XLA's flags for this process's JAX (a kernel cap, one thread): TF 1.15's XLA aborts on flags it lacks
        full_env.pop("XLA_FLAGS", None)
    full_env.update(env or {})
    for name in unset:
        full_env.pop(name, None)
    proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                          env=full_env, cwd=cwd, universal_newlines=True)
    if check and proc.returncode != 0:
        raise AssertionError("child failed (%d):\nstdout:\n%s\nstderr:\n%s"
                             % (proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:]))
    return proc


def build_golden(path, steps, initial=None, meta=None, info=None, change=None, drop=(), **options):
    """The one synthetic-golden builder. `steps` yields one {"kind/name": value} mapping per
    step, in recording order; `initial` is the state before the first step. info(k) is step
    k's info; change(k, key, value) -> value perturbs a value (an "actual" trace) and keys in
    `drop` are left out. `options` go to tracekit.create."""
    import tracekit

    with tracekit.create(path, meta=meta, **options) as w:
        if initial is not None:
            with w.initial():
                for key, value in initial.items():
                    w.add(*key.split("/", 1), value=value)
        for k, values in enumerate(steps):
            with w.step(info=None if info is None else info(k)):
                for key, value in values.items():
                    if key in drop:
                        continue
                    if change is not None:
                        value = change(k, key, value)
                    w.add(*key.split("/", 1), value=value)
    return path


def write_steps(path, n, big=False, **options):
    """A finished synthetic golden: initial state and `n` steps of payloads.step_values."""
    from . import payloads

    return build_golden(path, (payloads.step_values(k, big) for k in range(n)), payloads.initial_values(),
                        meta={"user": {"test": True}}, info=lambda k: {"global_step": k + 1}, **options)
