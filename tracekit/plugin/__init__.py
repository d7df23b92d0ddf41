"""tracekit's pytest plugin (the `pytest11` entry point `tracekit`): replay tests in a few lines.

    def test_port_trains_like_tf1(tracekit_replay):
        model, step = make_port()
        tracekit_replay("seed_example", step, model=model)      # goldens/seed_example.h5

Options (one group, one prefix; `pytest --help` lists them): --tracekit-goldens DIR,
--tracekit-update=none|new|all, --tracekit-reason TEXT, --tracekit-unused=fail|warn|delete,
--tracekit-no-keep; ini values tracekit_goldens and tracekit_tolerance; the marker
`@pytest.mark.tracekit(tolerance=...)`. In CI (CI set, not false/0) nothing is created,
rewritten or deleted. replay.py holds the fixture; this module the options and the run's
bookkeeping, which under pytest-xdist happens on the controller, from the test reports.
Imports no TensorFlow; Python 3.7 syntax (the legacy environment loads it too).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Set

import pytest

from ..lifecycle.run import RunSummary, Unused, Use, find_unused, golden_files, owners
from ..lifecycle.update import retire
from ..report.lifecycle import summary_lines
from .replay import UNUSED_MODES, UPDATE_MODES, GoldenReplay, Settings, header, settings_from

SETTINGS = pytest.StashKey[Settings]()

__all__ = ["tracekit_replay"]


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("tracekit", "tracekit: replay TF2 ports against golden traces")
    group.addoption("--tracekit-goldens", metavar="DIR", default=None,
                    help="where golden names resolve, relative to the rootdir (default: the tracekit_goldens "
                         "ini value, goldens)")
    group.addoption("--tracekit-update", choices=UPDATE_MODES, default="none",
                    help="none (default): never write goldens. new: write goldens that do not exist (a derived "
                         "golden from the TF2 run on the test's data=). all: also rewrite the goldens of tests "
                         "that failed or were named by node id, and let them pass (the only way a legacy-recorded "
                         "golden is overwritten). Ignored in CI.")
    group.addoption("--tracekit-reason", metavar="TEXT", default=None,
                    help="why the goldens changed: stored in the history of every golden this run writes")
    group.addoption("--tracekit-unused", choices=UNUSED_MODES, default=None,
                    help="a golden whose owning tests all passed without using it: fail the run, warn, or "
                         "delete it (moved to .tracekit/history; never in CI). Default: fail in CI, warn locally")
    group.addoption("--tracekit-no-keep", action="store_true", default=False,
                    help="do not keep goldens this run replaces under .tracekit/history")
    parser.addini("tracekit_goldens", "where golden names resolve, relative to the rootdir", default="goldens")
    parser.addini("tracekit_tolerance", "the replay tests' default tolerance: auto (chosen from the two traces), "
                                        "default, training, round-off, exact, or a TOML file", default="auto")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "tracekit(tolerance=...): the tolerance of this test's tracekit_replay "
                                       "(a Tolerance, a profile name or a TOML file)")
    workerinput = getattr(config, "workerinput", None)
    settings = settings_from(config, workerinput.get("tracekit_run") if workerinput else None)
    config.stash[SETTINGS] = settings
    if workerinput is None:  # the controller (or a run without xdist) keeps the books
        config.pluginmanager.register(Bookkeeper(settings), "tracekit-bookkeeper")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: every worker's pending entries belong to the controller's run."""
    node.workerinput["tracekit_run"] = node.config.stash[SETTINGS].run


def pytest_report_header(config: Any) -> List[str]:
    return header(config.stash[SETTINGS])


@pytest.fixture
def tracekit_replay(request: Any) -> GoldenReplay:
    """Replay a TF2 port against a golden and compare: tracekit_replay(golden, step, model=...)."""
    return GoldenReplay(request, request.config.stash[SETTINGS])


class Bookkeeper:
    """The run's uses of goldens, gathered from the test reports (every worker's reach the
    controller), the unused goldens, and the summary block at the end."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.uses: Dict[str, List[Use]] = {}  # node id -> its uses, from its latest report
        self.passed: Set[str] = set()
        self.summary: Optional[RunSummary] = None

    def pytest_runtest_logreport(self, report: Any) -> None:
        found = [Use.from_wire(value) for name, value in getattr(report, "user_properties", ())
                 if name == "tracekit" and isinstance(value, dict)]
        if found:
            self.uses[report.nodeid] = found
        if report.when == "call" and report.passed:
            self.passed.add(report.nodeid)

    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        settings = self.settings
        summary = RunSummary(uses=[use for uses in self.uses.values() for use in uses], update=settings.update,
                             unused_mode=settings.unused, ci=settings.ci,
                             pending_dir=os.path.relpath(settings.workspace.pending, settings.root))
        if os.path.isdir(settings.goldens):
            relative = settings.workspace.relative
            owned, unreadable = owners(golden_files(settings.goldens))
            used = {use.golden for use in summary.uses}
            summary.unreadable = [relative(path) for path in unreadable]
            for path, tests in find_unused({relative(p): t for p, t in owned.items()}, used, self.passed):
                moved = None
                if settings.unused == "delete" and not settings.ci:
                    moved = relative(retire(settings.workspace.resolve(path), settings.workspace, "unused"))
                summary.unused.append(Unused(path, tests, moved))
        self.summary = summary
        failing = settings.unused == "fail" or (settings.unused == "delete" and settings.ci)
        if summary.unused and failing and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.summary is None or not self.summary.active:
            return
        terminalreporter.section("tracekit")
        for line in summary_lines(self.summary):
            terminalreporter.write_line(line)
