from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def not_in_ci(monkeypatch):
    """Goldens are never written in CI (tested there on purpose); these tests write them."""
    monkeypatch.delenv("CI", raising=False)
