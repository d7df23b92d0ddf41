"""The package's layering, enforced: record -> store -> replay -> comparison -> lifecycle -> report,
with the vocabulary and errors at the bottom and the entry points (the CLI, tracekit.tf1/tf2, the
pytest plugin) on top. A module imports only from
its own part or the parts below it (lazy imports inside functions count too)."""

from __future__ import annotations

import ast
import os

import tracekit

PACKAGE = os.path.dirname(tracekit.__file__)
# Rank of each top-level part: imports go to a lower rank, or within the same part.
RANKS = {
    "_version": 0, "errors": 0, "_isolate": 0, "_ci": 0, "_threads": 0, "_heap": 0,
    "keys": 1, "structure": 1, "sources": 1,
    "environment": 2, "taps": 2,
    "tf_environment": 2.5,  # what a running TensorFlow tells of the environment (environment: the machine)
    "store": 3,
    "digest_ops": 3.5,  # what TensorFlow computes of a digest (store.digest), for record and replay alike
    "record": 4, "replay": 4,
    "comparison": 5,
    "lifecycle": 6,
    "report": 7,
    "judge": 7.5,  # judging a port, framework-free: the adapters hand it their replays
    "cli": 8, "tf1": 8, "tf2": 8, "torch": 8, "jax": 8, "plugin": 8, "__init__": 8, "__main__": 8,
}


ENTRY = 8  # the entry points may use each other


def _part(module: str) -> str:
    """"store" for tracekit.store.reader, "keys" for tracekit.keys."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: str, module: str, top_only: bool = False, every: bool = False):
    """(line, module imported) of `path`'s imports of tracekit's modules (`every`: of any module)."""
    with open(path) as fh:
        tree = ast.parse(fh.read(), path)
    package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
    nodes = _top_level(tree.body) if top_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not (every or target.startswith("tracekit")):
                continue
            if node.module is None:  # from .. import taps: the names are the modules
                for alias in node.names:
                    yield node.lineno, target + "." + alias.name
            else:
                yield node.lineno, target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if every or alias.name.startswith("tracekit"):
                    yield node.lineno, alias.name


def _top_level(body):
    """Statements run at import time: the module body, and the bodies of its if/try blocks."""
    for node in body:
        yield node
        for block in ("body", "orelse", "finalbody"):
            if isinstance(node, (ast.If, ast.Try)):
                yield from _top_level(getattr(node, block, []))
        for handler in getattr(node, "handlers", []) if isinstance(node, ast.Try) else []:
            yield from _top_level(handler.body)


def test_nothing_imports_upward_or_sideways():
    problems = []
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].replace(os.sep, ".")
            module = rel[:-len(".__init__")] if rel.endswith(".__init__") else rel
            own = _part(module if not path.endswith("tracekit/__init__.py") else "tracekit")
            assert own in RANKS, "give tracekit.%s a rank in RANKS" % own
            for line, target in _imports(path, module):
                other = _part(target) if target != "tracekit" else "__init__"
                if other == own or (RANKS[own] == ENTRY and RANKS[other] == ENTRY):
                    continue
                if RANKS[other] >= RANKS[own]:
                    problems.append("%s:%d imports %s (%s is rank %d, %s rank %d)"
                                    % (rel, line, target, own, RANKS[own], other, RANKS[other]))
    assert not problems, "\n".join(problems)


def _modules():
    """(module name, path) of every module in the package."""
    for folder, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].replace(os.sep, ".")
                yield (rel[:-len(".__init__")] if rel.endswith(".__init__") else rel), path


def test_private_modules_stay_in_their_package():
    # tracekit.store._wire may be imported by tracekit.store.*, never by replay or the CLI.
    problems = []
    for module, path in _modules():
        for line, target in _imports(path, module):
            parts = target.split(".")
            for i, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__") and i > 1:
                    owner = ".".join(parts[:i])
                    if not (module == owner or module.startswith(owner + ".")):
                        problems.append("%s:%d imports the private %s" % (module, line, target))
    assert not problems, "\n".join(problems)


def test_no_import_cycle():
    # Module-level imports only: an import inside a function runs later and cannot deadlock
    # a partly initialised module.
    modules = dict(_modules())
    graph = {}
    for module, path in modules.items():
        targets = set()
        for _, target in _imports(path, module, top_only=True):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(target + "."):
                targets.add(target)  # a package's __init__ runs before its modules anyway
        graph[module] = targets
    state = {}

    def visit(module, stack):
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(target):] + [target]))
            if target not in state:
                visit(target, stack + [target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_threads_are_started_in_one_place_with_a_role_each():
    # _threads.py starts every thread, named tracekit-<role>: a thread dump tells them apart.
    roles = []
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            path = os.path.join(folder, name)
            if not name.endswith(".py") or path == os.path.join(PACKAGE, "_threads.py"):
                continue
            with open(path) as fh:
                tree = ast.parse(fh.read(), path)
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                assert called not in ("Thread", "ThreadPoolExecutor"), "%s:%d starts a thread: use _threads" % (
                    path, node.lineno)
                if called in ("start_thread", "pool") and node.args:
                    role = getattr(node.args[0], "value", getattr(node.args[0], "s", None))  # Python 3.7: ast.Str
                    if isinstance(role, str):
                        roles.append(role)
    assert len(roles) >= 5 and len(roles) == len(set(roles)), roles

