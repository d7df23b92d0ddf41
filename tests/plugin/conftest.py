"""The pytest plugin's tests run pytest itself (pytester) on small projects: a goldens folder
holding the shipped seed-example golden (recorded on TF 1.15.5; its first 10 steps) and the port
a user would write.
The modern environment only: replays need TensorFlow 2."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from ..support import ROOT, golden

collect_ignore_glob = ["test_*.py"] if sys.version_info < (3, 8) else []

# The user's project imports the shipped seed example's TF2 port (tools/ports; wrong ports
# through make()'s arguments). DATA is what a test without a legacy golden gives to create one.
PORT = '''
import numpy as np
from tools.ports.seed_example import make

rng = np.random.RandomState(0)
DATA = [{"x:0": rng.randn(2, 3).astype(np.float32), "y:0": np.eye(3, dtype=np.float32)[[k % 3, (k + 1) % 3]]}
        for k in range(3)]
'''


@pytest.fixture(scope="session")
def warm():
    """TensorFlow and every module a replay of the port loads, imported by this process before
    pytester snapshots sys.modules: pytester drops what an in-process run imported, and
    TensorFlow imported a second time aborts the process."""
    import types

    import tracekit.tf2

    port = types.ModuleType("warm_port")
    exec(compile(PORT, "warm_port", "exec"), port.__dict__)
    model, step = port.make()
    tracekit.tf2.replay(golden("seed_example"), step, model=model, steps=1).close()
    model, step = port.make()
    tracekit.tf2.derive(step, port.DATA[:1], model=model).close()


@pytest.fixture(scope="session")
def seed_golden(tmp_path_factory):
    """The first 10 of the shipped seed example golden's 100 steps, metadata and all: a legacy
    recording (TF 1.15.5's numbers), short enough to replay in a fraction of a second."""
    import tracekit

    path = str(tmp_path_factory.mktemp("seed") / "seed_example.h5")
    with tracekit.open(golden("seed_example")) as source:
        meta = {k: v for k, v in source.meta.items() if k != "catalog"}
        with tracekit.create(path, meta=meta) as writer:
            with writer.initial():
                for key, value in source.initial.items():
                    writer.add(*key.split("/", 1), value=value)
            for index in range(10):
                step = source.step(index)
                with writer.step(info=step.info):
                    for key, value in step.items():
                        writer.add(*key.split("/", 1), value=value)
    return path


@pytest.fixture
def project(warm, seed_golden, pytester, monkeypatch):
    """A user's project: goldens/seed_example.h5 (a legacy recording) and port.py; not in CI
    unless a test sets CI. Returns pytester."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.setenv("COLUMNS", "400")  # pytest's summary lines are not cut at 80 characters
    os.makedirs(str(pytester.path / "goldens"))
    shutil.copyfile(seed_golden, str(pytester.path / "goldens" / "seed_example.h5"))
    pytester.makepyfile(port=PORT)
    pytester.syspathinsert()
    pytester.syspathinsert(ROOT)  # tools.ports, in-process
    monkeypatch.setenv("PYTHONPATH", ROOT)  # and in pytest subprocesses and xdist workers
    return pytester
