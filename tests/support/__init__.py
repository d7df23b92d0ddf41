"""Helpers the tests share: paths, child interpreters, the shipped goldens, a synthetic
golden. conftest modules hold fixtures only; tests import helpers from here. Runs in both
environments (Python 3.7 syntax)."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDENS = os.path.join(ROOT, "goldens")
FOREIGN_GOLDENS = os.path.join(ROOT, "tests", "data", "foreign_cpu")  # the same, from another machine
LEGACY_PYTHON = os.path.join(ROOT, ".venv-legacy", "bin", "python")
IS_LEGACY = sys.version_info < (3, 8)


def golden(name):
    """The path of a shipped golden: golden("seed_example")."""
    return os.path.join(GOLDENS, name + ".h5")


def run_python(python, code_or_args, timeout=300, env=None, check=True, unset=()):
    """Run a Python child (this interpreter or the legacy one), with `env` added to this
    process's environment and the variables in `unset` removed; returns CompletedProcess."""
    args = [python] + (["-c", code_or_args] if isinstance(code_or_args, str) else list(code_or_args))
    full_env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    full_env.update(env or {})
    for name in unset:
        full_env.pop(name, None)
    proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                          env=full_env, cwd=ROOT, universal_newlines=True)
    if check and proc.returncode != 0:
        raise AssertionError("child failed (%d):\nstdout:\n%s\nstderr:\n%s"
                             % (proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:]))
    return proc


def write_steps(path, n, big=False, **options):
    """A finished synthetic golden: initial state and `n` steps of payloads.step_values."""
    import tracekit

    from . import payloads

    with tracekit.create(path, meta={"user": {"test": True}}, **options) as w:
        with w.initial():
            for key, value in payloads.initial_values().items():
                w.add(*key.split("/", 1), value=value)
        for k in range(n):
            with w.step(info={"global_step": k + 1}):
                for key, value in payloads.step_values(k, big).items():
                    w.add(*key.split("/", 1), value=value)
    return path
