"""tracekit's pytest plugin (the `pytest11` entry point `tracekit`): replay tests in a few lines.

    def test_port_trains_like_tf1(tracekit_replay):
        model, step = make_port()
        tracekit_replay("seed_example", step, model=model)      # goldens/seed_example.h5

hooks.py holds the options, the fixture and the run's bookkeeping; replay.py what the
fixture does (docs/GOLDENS.md). The plugin is loaded in every pytest run of an environment
where tracekit is installed, the legacy one included, so it imports no TensorFlow, uses
Python 3.7 syntax, and stays out of the way (it registers nothing) under a pytest older
than 7, whose plugin API it needs.
"""

from __future__ import annotations

import pytest

if int(pytest.__version__.split(".")[0]) >= 7:
    from .hooks import (pytest_addoption, pytest_configure, pytest_configure_node, pytest_report_header,  # noqa: F401
                        pytest_runtest_makereport, tracekit_replay)
