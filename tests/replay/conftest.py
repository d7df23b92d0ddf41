"""Replay tests: the modern environment only (TensorFlow 2.21 + tf-keras)."""

from __future__ import annotations

import os
import sys

import pytest


# The ports are TF 2 code: the legacy run (Python 3.7, TF 1.15) does not even import them.
collect_ignore_glob = ["test_*.py"] if sys.version_info < (3, 8) else []

# MirroredStrategy on this CPU-only machine needs logical CPU devices, and TensorFlow allows
# them only before its runtime starts: here, at collection, before any test runs an op.
REPLICA_DEVICES = 4
if sys.version_info >= (3, 8):
    import tracekit.tf2

    tracekit.tf2.logical_cpus(REPLICA_DEVICES)


def pytest_collection_modifyitems(items):
    for item in items:
        if os.sep + "replay" + os.sep in str(item.fspath):
            item.add_marker(pytest.mark.modern)


@pytest.fixture(scope="session")
def tf2():
    import tracekit.tf2

    return tracekit.tf2

