"""JAX ports' tests: the modern environment, with JAX, flax and optax (tools/bootstrap installs
them there). Without them they skip, saying so; in CI they fail."""

from __future__ import annotations

import os
import sys

import pytest

from tracekit._ci import in_ci

# Python 3.7's legacy environment has no JAX and never imports the ports.
collect_ignore_glob = ["test_*.py"] if sys.version_info < (3, 8) else []


def pytest_collection_modifyitems(items):
    for item in items:
        if os.sep + "jax" + os.sep in str(item.fspath):
            item.add_marker(pytest.mark.modern)


@pytest.fixture(scope="session")
def tj():
    """tracekit.jax, or a skip (a failure in CI) where JAX, flax or optax is not installed."""
    try:
        import flax  # noqa: F401
        import jax  # noqa: F401
        import optax  # noqa: F401
    except ImportError as missing:
        if in_ci():
            pytest.fail("%s is not installed, and CI must run the JAX ports' tests (tools/bootstrap installs it)"
                        % missing.name)
        pytest.skip("%s is not installed (tools/bootstrap modern installs it)" % missing.name)
    import tracekit.jax

    return tracekit.jax
