"""PyTorch ports' tests: the modern environment, with PyTorch (tools/bootstrap installs its CPU
build there). Without PyTorch they skip, saying so; in CI they fail."""

from __future__ import annotations

import os
import sys

import pytest

from tracekit._ci import in_ci

# Python 3.7's legacy environment has no PyTorch and never imports the ports.
collect_ignore_glob = ["test_*.py"] if sys.version_info < (3, 8) else []


def pytest_collection_modifyitems(items):
    for item in items:
        if os.sep + "torch" + os.sep in str(item.fspath):
            item.add_marker(pytest.mark.modern)


@pytest.fixture(scope="session")
def tt():
    """tracekit.torch, or a skip (a failure in CI) where PyTorch is not installed."""
    try:
        import torch  # noqa: F401
    except ImportError:
        if in_ci():
            pytest.fail("PyTorch is not installed, and CI must run the PyTorch ports' tests (tools/bootstrap "
                        "installs it)")
        pytest.skip("PyTorch is not installed (tools/bootstrap modern installs it)")
    import tracekit.torch

    return tracekit.torch
