"""The `tracekit_replay` fixture: replay a TF2 port against a golden in a test, compare, and
handle what follows (a pending actual, a created or rewritten golden) as the run's options
say. TensorFlow is imported when a replay runs, not before."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import pytest

from .._ci import in_ci
from ..comparison import Tolerance
from ..comparison.profiles import AUTO, check_spec, resolve_tolerance
from ..errors import Mismatch, MissingDependency, UsageError
from ..lifecycle import pending
from ..lifecycle.run import CREATED, FAILED, MISSING, PASSED, UPDATED, Use
from ..lifecycle.update import write_golden
from ..lifecycle.workspace import Workspace
from ..report.comparison import headline
from ..report.reported import Reported, compare
from ..replay.factory import framework_of_model, made
from ..replay.options import ReplayOptions
from ..store import open_trace
from ..store.remote import is_url

UPDATE_MODES = ("none", "new", "all")
UNUSED_MODES = ("fail", "warn", "delete")


@dataclass
class Settings:
    """One test run's tracekit options, resolved."""

    root: str  # the project root: pytest's rootdir, where .tracekit lives
    goldens: str  # absolute, or a URL (read-only goldens: docs/GOLDENS.md)
    update: str  # as asked; `writes` says whether anything may be written
    reason: Optional[str]
    unused: str
    unused_given: bool  # --tracekit-unused was on the command line
    keep: bool
    tolerance: str  # the ini default: a profile name or a TOML file
    ci: bool
    report_dir: Optional[str] = None  # absolute: an HTML report for each failing replay goes here
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    invocation: str = ""
    args: Sequence[str] = ()

    @property
    def writes(self) -> bool:
        return not self.ci and self.update != "none"

    @property
    def workspace(self) -> Workspace:
        return Workspace(self.root)

    def resolve(self, golden: Any) -> str:
        """A name ("seed_example", "ports/mlp") is a golden under the goldens directory (or URL:
        URL/ports/mlp.h5); a path (a PathLike, or a str ending in .h5) is taken relative to the
        project root, a URL as it is."""
        __tracebackhide__ = True
        if is_url(golden):
            return golden
        if isinstance(golden, os.PathLike) or (isinstance(golden, str) and golden.endswith(".h5")):
            path = os.fspath(golden)
            return path if os.path.isabs(path) else os.path.normpath(os.path.join(self.root, path))
        if not isinstance(golden, str) or not golden:
            raise UsageError("a golden is a name under the goldens directory or a path to an .h5 file, got %r"
                             % (golden,))
        if is_url(self.goldens):
            return "%s/%s.h5" % (self.goldens.rstrip("/"), golden)
        return os.path.normpath(os.path.join(self.goldens, golden + ".h5"))

    def name_of(self, path: str) -> str:
        """The pending entry's name: the golden's path under the goldens directory (or URL), without .h5."""
        if is_url(path) or is_url(self.goldens):
            prefix = self.goldens.rstrip("/") + "/"
            rel = path[len(prefix):] if path.startswith(prefix) else path.rsplit("/", 1)[-1]
        else:
            rel = os.path.relpath(path, self.goldens)
            if rel.startswith(os.pardir):
                rel = os.path.basename(path)
        return (rel[:-3] if rel.endswith(".h5") else rel).replace(os.sep, "/")

    def asked(self, item: Any) -> bool:
        """The test was named on the command line by its node id (path::name, path::Class, or a
        test without its parameters), not just selected by its file, -k or -m."""
        own = item.nodeid.partition("::")[2]
        for arg in self.args:
            path, sep, rest = str(arg).partition("::")
            if sep and (own == rest or own.startswith((rest + "::", rest + "["))) and \
                    os.path.abspath(os.path.join(self.invocation, path)) == os.path.abspath(str(item.path)):
                return True
        return False

    def tolerance_for(self, given: Any, item: Any) -> "Tolerance | str | None":
        """The test's tolerance: the argument, else the `tracekit` marker's, else the ini default."""
        __tracebackhide__ = True
        if given is None:
            marker = item.get_closest_marker("tracekit")
            given = marker.kwargs.get("tolerance") if marker is not None else None
        return resolve_tolerance(self.tolerance if given is None else given, self.root)


def _tf2() -> Any:
    try:
        import tracekit.tf2 as tf2
    except MissingDependency as exc:
        pytest.fail(str(exc), pytrace=False)
    return tf2


class GoldenReplay:
    """tracekit_replay(golden, step, model=..., tolerance=..., data=..., **replay options)."""

    def __init__(self, request: Any, settings: Settings) -> None:
        self._item = request.node
        self._settings = settings
        self._traces: List[Any] = []
        request.addfinalizer(self._close)

    @property
    def actual(self) -> Any:
        """The last replay's actual trace (a tracekit.Trace), open until the test ends."""
        if not self._traces:
            raise UsageError("tracekit_replay.actual: nothing was replayed yet in this test")
        return self._traces[-1]

    def _close(self) -> None:
        for trace in self._traces:
            trace.close()  # a temporary trace: its file goes with it

    def __call__(self, golden: Any, step: Any = None, *, model: Any = None, variables: Any = None,
                 tolerance: Any = None, data: Optional[Sequence[Mapping[str, Any]]] = None,
                 make_port: Any = None, **options: Any) -> Optional[Reported]:
        """Replay `step` (and `model`/`variables`) against `golden` and compare with the test's
        tolerance; fail with the first divergence, keeping the actual trace as a pending
        entry. Returns the comparison (None when this run created the golden); the actual trace
        is `tracekit_replay.actual` until the test ends.

        golden: a name under the goldens directory, or a path to an .h5 file.
        tolerance: a Tolerance, a profile name or a TOML file; default: the `tracekit` marker's,
          else the tracekit_tolerance ini value ("auto": chosen from the two traces).
        data: one {input name: array} per step, used only when the golden does not exist: the
          TF2 run on it makes a derived golden (--tracekit-update=new) or a pending one.
        make_port: the port's factory (a fresh (model, step[, replay options]) per call; step and
          model may then be left out): a golden longer than tracekit.comparison.arbiter.LONG_GOLDEN
          steps is then judged by its local errors, the float64 arbiter and the drift envelope,
          as tracekit.tf2.check(make_port=) judges it.
        options: passed to tracekit.tf2.replay (var_map, init, random, steps, inputs, convert, strategy,
          input_api, global_batch_size, determinism, tf32, grappler, every), checked before anything
          runs; not out= (the plugin keeps the actual trace itself: a pending entry, or .actual).
          A PyTorch port (a torch.nn.Module for model, or make_port returning one) is replayed by
          tracekit.torch.replay: pass its optimizer=, or return {"optimizer": ...} from make_port.
        """
        __tracebackhide__ = True
        options = dict(options)
        optimizer = options.pop("optimizer", None)  # a PyTorch port's (tracekit.torch.replay's own argument)
        options = ReplayOptions.of(options, "tracekit_replay").given()  # checked before anything runs
        settings = self._settings
        path = settings.resolve(golden)
        rel = settings.workspace.relative(path)
        tol = settings.tolerance_for(tolerance, self._item)
        if step is None:
            if make_port is None:
                raise UsageError("tracekit_replay needs the port's step function, or its factory (make_port=)")
            model, step, options, optimizer = _made(make_port, options, optimizer)
        adapter = _adapter(model, optimizer)
        port = {"tracekit.torch": {"model": model, "optimizer": optimizer},
                "tracekit.jax": {"state": model}}.get(adapter.__name__, {"model": model, "variables": variables})
        if not is_url(path) and not os.path.exists(path):  # at a URL, the replay's GoldenNotFound names it
            message = self._missing(adapter, path, rel, step, model, variables, data, options)
            if message is None:
                return None
            pytest.fail(message, pytrace=False)
        if make_port is not None and "variables" in port:  # the judged verdict is TensorFlow 2's so far (and PyTorch's local view)
            result, actual = self._judged(adapter, path, step, model, variables, tol, make_port, options)
        else:
            actual = adapter.replay(path, step, **port, **options)
            result = compare(path, actual, tol)
        self._traces.append(actual)
        pending.clear_stale(settings.workspace, path, self._item.nodeid, settings.run)  # superseded now
        refused = ""
        if settings.writes and settings.update == "all" and (not result.ok or settings.asked(self._item)):
            try:
                self._write(actual, path, rel, UPDATED, headline(result))
            except UsageError as exc:  # a replay that cannot become the golden (fewer steps): say why
                refused = "\n\nnot rewritten: %s" % exc
            else:
                return compare(path, actual, tol)  # against the golden it is now
        if result.ok and not refused:
            self._use(rel, PASSED)
            return result
        line = headline(result) if not result.ok else "matches, but cannot replace it"
        entry = self._keep(actual, path, pending.MISMATCH, line, result.report(), result.profile.name)
        slip = result.names_a_slip
        self._use(rel, FAILED, entry.name, line, slip=slip)
        raise Mismatch("golden %s: %s%s\n\n%s\n\n%s%s" % (rel, line, refused, result.report(),
                                                         self._what_now(entry, slip), self._html(result)))

    def _judged(self, tf2: Any, path: str, step: Any, model: Any, variables: Any, tol: Any, make_port: Any,
                options: Mapping[str, Any]) -> Tuple[Reported, Any]:
        """check(make_port=): the verdict (local for a long golden), and the actual trace to keep: the
        port's replay from its own state (written by the drift view, else replayed once more)."""
        folder = tempfile.mkdtemp(prefix="tracekit-judged-")
        out = os.path.join(folder, "actual.h5")
        try:
            result = tf2.check(path, step, model=model, variables=variables, tolerance=tol, make_port=make_port,
                               out=out, **options)
            if os.path.exists(out):
                actual = open_trace(out)
                actual.delete_when_closed(folder)
            else:  # a local error decided before the drift view wrote it: the port's own run, for review
                shutil.rmtree(folder, ignore_errors=True)
                fresh, port_step, joined, _ = _made(make_port, options)
                actual = tf2.replay(path, port_step, model=fresh, variables=variables, **joined)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return result, actual

    def _html(self, result: Reported) -> str:
        """With --tracekit-report DIR: the failing comparison's HTML page, named after the test;
        the line saying where it is (or why there is none)."""
        folder = self._settings.report_dir
        if folder is None:
            return ""
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", self._item.nodeid).strip("_")[:150] + ".html"
        try:
            os.makedirs(folder, exist_ok=True)
            page = result.write_html(os.path.join(folder, name))
        except (MissingDependency, OSError) as exc:
            return "\nno HTML report: %s" % exc
        return "\nHTML report: %s" % os.path.relpath(page, self._settings.root)

    def _missing(self, tf2: Any, path: str, rel: str, step: Any, model: Any, variables: Any,
                 data: Optional[Sequence[Mapping[str, Any]]], options: Mapping[str, Any]) -> Optional[str]:
        """No golden: make one from the TF2 run on `data` when allowed, else say how (None: made)."""
        settings = self._settings
        ways = ("golden %s does not exist. Create it either way:\n"
                "  1. record it on the legacy environment: tracekit record -o %s -- YOUR_TF1_SCRIPT.py [ARGS]\n"
                "  2. or make a derived golden from this TF2 run: pass data=[{input name: array}, ...] (one per step) "
                "to tracekit_replay and run pytest --tracekit-update=new" % (rel, path))
        if settings.ci:
            ways += "\nCI is set (CI=%s): goldens are never created in CI, whatever --tracekit-update says; create it " \
                    "locally and commit it" % os.environ.get("CI")
        if data is None:
            self._use(rel, MISSING, headline="no golden")
            return ways
        if not hasattr(tf2, "derive"):
            raise UsageError("golden %s does not exist, and a golden derived from a %s run (data=) is not built yet: "
                             "record it on the legacy environment (tracekit record)"
                             % (rel, "PyTorch" if tf2.__name__ == "tracekit.torch" else "JAX"))
        inputs = {"inputs": options["inputs"]} if "inputs" in options else {}
        actual = tf2.derive(step, data, model=model, variables=variables, **inputs)
        self._traces.append(actual)
        pending.clear_stale(settings.workspace, path, self._item.nodeid, settings.run)
        if settings.writes:
            self._write(actual, path, rel, CREATED, "created from %d steps of data" % len(actual))
            return None
        entry = self._keep(actual, path, pending.NEW, "a new golden: %d steps" % len(actual),
                           "no golden at %s: this TF2 run on the test's data would create it" % rel)
        self._use(rel, MISSING, entry.name, "no golden")
        return "%s\nThis run on data= is kept as pending %s: accept it with tracekit accept %s" % (
            ways, entry.name, entry.name)

    def _keep(self, actual: Any, path: str, kind: str, line: str, report: str,
              tolerance: Optional[str] = None) -> pending.Pending:
        settings = self._settings
        return pending.keep(settings.workspace, settings.name_of(path), actual.path, golden=path, kind=kind,
                            headline=line, report=report, test=self._item.nodeid, run=settings.run,
                            tolerance=tolerance)

    def _write(self, actual: Any, path: str, rel: str, outcome: str, line: str) -> None:
        settings = self._settings
        write_golden(actual, path, settings.workspace, by="pytest --tracekit-update=%s" % settings.update,
                     reason=settings.reason, test=self._item.nodeid, keep=settings.keep)
        self._use(rel, outcome, headline=line)

    def _use(self, rel: str, outcome: str, entry: Optional[str] = None, headline: str = "", slip: bool = False) -> None:
        # Reported through the test report's user properties: under pytest-xdist they reach the
        # controller, which alone sees every test's use of every golden.
        self._item.user_properties.append(("tracekit", Use(self._item.nodeid, rel, outcome, entry, headline,
                                                           slip).to_wire()))

    def _what_now(self, entry: pending.Pending, slip: bool = False) -> str:
        settings = self._settings
        kept = "the actual trace is kept as pending %s (%s)" % (entry.name, os.path.relpath(entry.trace, settings.root))
        if slip:
            return ("%s. The report names a slip in the port (above): fix the port and run again; the golden stays "
                    "what TF1 computed" % kept)
        if settings.ci:
            return ("%s. CI is set (CI=%s): goldens are never rewritten in CI, whatever --tracekit-update says; keep "
                    "%s as a build artifact and review it locally (tracekit review)"
                    % (kept, os.environ.get("CI"), os.path.relpath(settings.workspace.pending, settings.root)))
        return ("%s. If the change is intended: tracekit accept %s --reason '...' (or tracekit review), or rerun with "
                "--tracekit-update=all" % (kept, entry.name))


def _made(make_port: Any, options: Mapping[str, Any],
          optimizer: Any = None) -> Tuple[Any, Any, Dict[str, Any], Any]:
    """A fresh port: (model, step, the test's replay options joined by the port's own, the
    test's winning where both name one, and a PyTorch port's optimizer)."""
    model, step, own = made(make_port)
    optimizer = optimizer if optimizer is not None else own.get("optimizer")
    own = {k: v for k, v in own.items() if k != "optimizer"}
    joined = ReplayOptions.of(options, "tracekit_replay").merged(own, "the replay options make_port() returned",
                                                                 frozenset({"model"}), clash="caller")
    return model, step, joined.given(), optimizer


def _adapter(model: Any, optimizer: Any) -> Any:
    """What replays the port: tracekit.torch for a PyTorch one (an optimizer given, or a
    torch.nn.Module for its model), tracekit.jax for a JAX one (a train state for its model:
    params, opt_state and tx), tracekit.tf2 otherwise."""
    framework = framework_of_model(model, optimizer)
    if framework == "torch":
        import tracekit.torch

        return tracekit.torch
    if framework == "jax":
        import tracekit.jax

        return tracekit.jax
    return _tf2()


def settings_from(config: Any, controller: Optional[Mapping[str, Any]] = None) -> Settings:
    """The run's settings; `controller`: under pytest-xdist, what the controller told this worker
    (its run id, its command line and directory, which decide what a node id asks for)."""
    goldens = config.getoption("tracekit_goldens") or config.getini("tracekit_goldens") or "goldens"
    root = str(config.rootpath)
    update = config.getoption("tracekit_update")
    if is_url(goldens) and update != "none":
        raise pytest.UsageError("--tracekit-update=%s writes goldens, and the goldens are at a URL (%s), which "
                                "tracekit only reads: point --tracekit-goldens at a local folder to create or "
                                "update goldens, then upload them (docs/GOLDENS.md)" % (update, goldens))
    ci = in_ci()
    unused = config.getoption("tracekit_unused") or ("fail" if ci else "warn")
    tolerance = config.getini("tracekit_tolerance") or AUTO
    try:
        check_spec(tolerance)
    except UsageError as exc:
        raise pytest.UsageError("tracekit_tolerance in %s: %s" % (config.inipath, exc)) from None
    if not is_url(goldens):
        goldens = os.path.normpath(os.path.join(root, goldens))
    settings = Settings(root=root, goldens=goldens, update=update, reason=config.getoption("tracekit_reason"),
                        unused=unused, unused_given=config.getoption("tracekit_unused") is not None,
                        keep=not config.getoption("tracekit_no_keep"),
                        tolerance=tolerance, ci=ci, report_dir=_report_dir(config, root),
                        invocation=str(config.invocation_params.dir), args=list(config.invocation_params.args))
    if controller:
        settings.run, settings.invocation, settings.args = controller["run"], controller["dir"], controller["args"]
    return settings


def _report_dir(config: Any, root: str) -> Optional[str]:
    folder = config.getoption("tracekit_report")
    return None if folder is None else os.path.normpath(os.path.join(str(config.invocation_params.dir), folder))


def for_workers(settings: Settings) -> Dict[str, Any]:
    return {"run": settings.run, "dir": settings.invocation, "args": list(settings.args)}


def header(settings: Settings) -> List[str]:
    goldens = settings.goldens if is_url(settings.goldens) else os.path.relpath(settings.goldens, settings.root)
    line = "tracekit: goldens %s, update %s, unused %s" % (goldens, settings.update, settings.unused)
    if settings.ci:
        line += " (CI is set: no golden is created, rewritten or deleted)"
    return [line]
