"""Shared fixtures. The suite runs in both environments: the modern one runs everything,
the legacy one (Python 3.7, TF 1.15) runs what is not marked `modern`."""

from __future__ import annotations

import os
import subprocess
import sys

# TF1-style code on TF >= 2.16 needs Keras 2 (tf-keras), chosen before TensorFlow's first import.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEGACY_PYTHON = os.path.join(ROOT, ".venv-legacy", "bin", "python")
IS_LEGACY = sys.version_info < (3, 8)


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


@pytest.fixture(scope="session")
def legacy_python():
    """The legacy environment's interpreter. Absent on a machine without Python 3.7: the
    test is skipped, saying so; under CI=true its absence fails instead."""
    if os.path.exists(LEGACY_PYTHON):
        return LEGACY_PYTHON
    message = ("legacy environment .venv-legacy not built (no Python 3.7 here; "
               "pyenv install 3.7.16, then tools/bootstrap)")
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)
