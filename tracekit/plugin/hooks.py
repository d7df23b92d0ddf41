"""The plugin's hooks: options in one group, the tracekit_replay fixture, and the books of
the run, kept where every test's report arrives (the controller under pytest-xdist):
which goldens each test used, which tests could have used one and did not run to the end,
and from that the unused goldens and the summary block."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Set

import pytest

from ..comparison.profiles import AUTO, profile_names
from ..errors import TracekitError
from ..lifecycle.run import RunSelection, RunSummary, Unused, Use, find_unused, golden_files, owners
from ..lifecycle.update import retire
from ..report.lifecycle import summary_lines
from .failures import shown
from .kerases import import_order_note
from .replay import UNUSED_MODES, UPDATE_MODES, GoldenReplay, Settings, for_workers, header, settings_from

SETTINGS = pytest.StashKey[Settings]()
FIXTURE = "tracekit_replay"


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("tracekit", "tracekit: replay TF2 ports against golden traces")
    group.addoption("--tracekit-goldens", metavar="DIR|URL", default=None,
                    help="where golden names resolve: a folder relative to the rootdir, or a URL prefix (https://, "
                         "s3://, gs://: NAME reads URL/NAME.h5, read-only) (default: the tracekit_goldens ini "
                         "value, goldens)")
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
    group.addoption("--tracekit-report", metavar="DIR", default=None,
                    help="write an HTML report (tracekit report's page) for each failing replay test into DIR, "
                         "named after the test (needs matplotlib: tracekit[report])")
    group.addoption("--tracekit-no-keep", action="store_true", default=False,
                    help="do not keep goldens this run replaces under .tracekit/history")
    parser.addini("tracekit_goldens", "where golden names resolve, relative to the rootdir", default="goldens")
    parser.addini("tracekit_tolerance", "the replay tests' default tolerance: %s (chosen from the two traces), %s, "
                                        "or a TOML file" % (AUTO, ", ".join(profile_names())), default=AUTO)


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "tracekit(tolerance=...): the tolerance of this test's tracekit_replay "
                                       "(a Tolerance, a profile name or a TOML file)")
    controller = getattr(config, "workerinput", {}).get("tracekit")
    settings = settings_from(config, controller)
    config.stash[SETTINGS] = settings
    observer = Observer(config)
    config.pluginmanager.register(observer, "tracekit-observer")
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist) keeps the books
        config.pluginmanager.register(Bookkeeper(settings, observer), "tracekit-bookkeeper")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: a worker's pending entries belong to the controller's run, and its node ids
    are read against the controller's command line."""
    node.workerinput["tracekit"] = for_workers(node.config.stash[SETTINGS])


def pytest_report_header(config: Any) -> List[str]:
    return header(config.stash[SETTINGS])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    """A tracekit error fails a test with its message first and the user's frames (failures.py)."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and report.failed:
        text = shown(call.excinfo, item.config.getoption("tbstyle", "auto"))
        if text is not None:
            report.longrepr = text


@pytest.fixture
def tracekit_replay(request: Any) -> GoldenReplay:
    """Replay a TF2 port against a golden and compare: tracekit_replay(golden, step, model=...)."""
    return GoldenReplay(request, request.config.stash[SETTINGS])


class Observer:
    """What this process collected: the selected tests that request the fixture, and whether a
    test requesting it was deselected or a module failed to collect. A pytest-xdist worker hands
    it to the controller when it ends."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.selection = RunSelection()

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.selection.collection_errors += 1

    def pytest_deselected(self, items: Any) -> None:
        self.selection.deselected += sum(1 for item in items if FIXTURE in getattr(item, "fixturenames", ()))

    def pytest_collection_finish(self, session: Any) -> None:
        self.selection.requesting.extend(item.nodeid for item in session.items
                                         if FIXTURE in getattr(item, "fixturenames", ()))
        note = import_order_note() if self.selection.requesting else None
        if note is not None:
            self.selection.warnings.append(note)
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None and not hasattr(self.config, "workerinput"):
                reporter.write_line("tracekit: WARNING " + note, yellow=True)

    def pytest_sessionfinish(self, session: Any) -> None:
        if hasattr(self.config, "workeroutput"):
            self.config.workeroutput["tracekit"] = self.selection.to_wire()


class Bookkeeper:
    """The run's uses of goldens, gathered from the test reports (every worker's reach the
    controller), the unused goldens, and the summary block at the end."""

    def __init__(self, settings: Settings, observer: Observer) -> None:
        self.settings = settings
        self.selection = observer.selection  # under xdist: the workers' merged into it
        self.uses: Dict[str, List[Use]] = {}  # node id -> its uses, from its latest report
        self.passed: Set[str] = set()
        self.summary: Optional[RunSummary] = None

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist: a worker ended; what it collected (every worker collects every test)."""
        found = getattr(node, "workeroutput", {}).get("tracekit")
        self.selection.merge(RunSelection.from_wire(found) if found is not None and not error else None)

    def pytest_runtest_logreport(self, report: Any) -> None:
        found = [Use.from_wire(value) for name, value in getattr(report, "user_properties", ())
                 if name == "tracekit" and isinstance(value, dict)]
        if found:
            self.uses[report.nodeid] = found
        if report.when == "call" and report.passed:
            self.passed.add(report.nodeid)

    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        settings = self.settings
        summary = RunSummary(uses=[use for uses in self.uses.values() for use in uses], ci=settings.ci,
                             pending_dir=os.path.relpath(settings.workspace.pending, settings.root),
                             warnings=list(self.selection.warnings))
        self.summary = summary
        if not os.path.isdir(settings.goldens) or not (summary.uses or self.selection.requesting or
                                                       settings.unused_given):
            return  # no replay test here: the goldens are not this run's business
        relative = settings.workspace.relative
        owned, unreadable = owners(golden_files(settings.goldens))
        summary.unreadable = [relative(path) for path in unreadable]
        candidates = find_unused({relative(p): t for p, t in owned.items()}, {u.golden for u in summary.uses},
                                 self.passed)
        # Any replay test that did not run to the end may use any golden: judge none then.
        summary.unjudged = self.selection.not_run(self.passed | set(self.uses))
        if summary.unjudged:
            summary.possibly_unused = [golden for golden, _ in candidates]
            return
        for golden, tests in candidates:
            summary.unused.append(Unused(golden, tests, self._delete(golden, summary)))
        failing = settings.unused == "fail" or (settings.unused == "delete" and settings.ci)
        if summary.unused and failing and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _delete(self, golden: str, summary: RunSummary) -> Optional[str]:
        """With --tracekit-unused=delete (never in CI): move the golden to .tracekit/history."""
        if self.settings.unused != "delete" or self.settings.ci:
            return None
        workspace = self.settings.workspace
        try:
            return workspace.relative(retire(workspace.resolve(golden), workspace, "unused"))
        except (TracekitError, OSError) as exc:
            summary.problems.append("could not move %s: %s" % (golden, exc))
            return None

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.summary is None or not self.summary.active:
            return
        terminalreporter.section("tracekit")
        for line in summary_lines(self.summary):
            terminalreporter.write_line(line)
