"""The framework-free core: the parts of tracekit that read, compare, judge and report a golden
import no machine-learning framework, directly or through another tracekit module, and import
in an interpreter where none can be imported, where the core's own unit tests pass too. A port's framework is its adapter's business
(TensorFlow 2's: tf2/; the recorder, record/, is the TF 1.15 side)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .test_layers import PACKAGE, _imports, _modules

FRAMEWORKS = ("tensorflow", "tf_keras", "keras", "torch", "jax", "jaxlib", "flax", "optax")
# The parts of the package that are framework-free.
CORE_PARTS = ("_version", "errors", "_isolate", "_ci", "_threads", "_heap", "keys", "structure", "sources",
              "environment", "store", "replay", "comparison", "lifecycle", "report", "judge")
# Outputs that exist to hand a framework's own tools what tracekit found.
ADAPTED = {"tracekit.report.tensorboard": "writes TensorBoard's event files with TensorFlow's summary writer"}


def _core():
    modules = dict(_modules())
    core = {}
    for module, path in modules.items():
        parts = module.split(".")
        part = parts[1] if len(parts) > 1 else ""
        if module in ADAPTED:
            continue
        if part in CORE_PARTS:
            core[module] = path
    return modules, core


def _framework(target):
    return target.split(".")[0] in FRAMEWORKS


def test_the_core_imports_no_framework_and_nothing_outside_the_core():
    modules, core = _core()
    assert len(core) > 100 and "tracekit.replay.loop" in core
    problems = []
    for module, path in sorted(core.items()):
        for line, target in _imports(path, module, every=True):
            if _framework(target):
                problems.append("%s:%d imports %s" % (module, line, target))
                continue
            if not target.startswith("tracekit"):
                continue
            while target not in modules and "." in target:  # a name imported from a module
                target = target.rpartition(".")[0]
            if target in modules and target not in core and target != "tracekit":
                problems.append("%s:%d imports %s, which is not framework-free" % (module, line, target))
    assert not problems, "\n".join(problems)


def test_a_framework_import_in_the_core_is_seen(tmp_path):
    # The check above reads lazy imports too: a module that imports TensorFlow inside a function
    # would pass an import-time test and still need TensorFlow to run.
    path = tmp_path / "m.py"
    path.write_text("def f():\n    import tensorflow.compat.v1 as tf\n    from torch import nn\n    return tf, nn\n")
    assert [t for _, t in _imports(str(path), "tracekit.store.m", every=True) if _framework(t)] == [
        "tensorflow.compat.v1", "torch"]


BLOCKED = """
import importlib.abc, sys
FRAMEWORKS = %r
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in FRAMEWORKS:
            raise ImportError("no %%s here" %% name)
sys.meta_path.insert(0, Absent())
import importlib
for name in sys.argv[1:]:
    importlib.import_module(name)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in FRAMEWORKS)
assert not loaded, loaded
print(len(sys.argv) - 1)
"""


def test_the_core_imports_where_no_framework_can_be_imported():
    _, core = _core()
    # The replay engine, and judge/ on it, run in the modern environment only (Python >= 3.8: typing.Protocol).
    modern = sys.version_info >= (3, 8)
    names = sorted(m for m in core if not m.endswith("__main__") and
                   (modern or not m.startswith(("tracekit.replay", "tracekit.judge"))))
    env = dict(os.environ)
    env.pop("TF_USE_LEGACY_KERAS", None)
    done = subprocess.run([sys.executable, "-c", BLOCKED % (FRAMEWORKS,)] + names, capture_output=True, text=True,
                          cwd=os.path.dirname(PACKAGE), env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == str(len(names))


@pytest.mark.parametrize("framework", ["tensorflow", "torch", "jax"])
def test_a_core_module_that_needs_a_framework_fails_there(framework, tmp_path):
    # The blocking interpreter itself: a module importing a framework does not import.
    (tmp_path / "needs.py").write_text("import %s\n" % framework)
    done = subprocess.run([sys.executable, "-c", BLOCKED % (FRAMEWORKS,), "needs"], capture_output=True, text=True,
                          cwd=str(tmp_path), timeout=120)
    assert done.returncode != 0 and "no %s here" % framework in done.stderr


# The core's test folders, and their modules left to the main run alone (campaigns and long fits:
# they too import nothing but the core, and would add minutes here).
CORE_TESTS = ("comparison", "report", "lifecycle", "store")
LONG = frozenset(["test_crash", "test_writer_races", "test_blockwise", "test_fingerprints_more", "test_activations",
                  "test_fingerprints", "test_interop", "test_structures"])
RUN_BLOCKED = BLOCKED.split("import importlib\nfor name")[0] + """
import pytest
code = pytest.main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in FRAMEWORKS)
assert not loaded, loaded
sys.exit(code)
"""


def _core_only(path, module, follow=True):
    """Whether the test module at `path` imports only the core, the standard library and the
    store's libraries (numpy, h5py, ...), also in the tests' support modules it imports (their own
    imports inside functions it may not call are left to the blocked run, which fails on them)."""
    for _, target in _imports(path, module, every=True):
        top = target.split(".")
        if top[0] in FRAMEWORKS or top[0] == "tools":
            return False
        if top[0] == "tracekit" and len(top) > 1 and top[1] not in CORE_PARTS:
            return False
        if follow and target.startswith("tests.support"):
            base = os.path.join(os.path.dirname(PACKAGE), *target.split("."))
            support = base + ".py" if os.path.exists(base + ".py") else os.path.join(base, "__init__.py")
            if os.path.exists(support) and not _core_only(support, target, follow=False):
                return False
    return True


@pytest.mark.modern
def test_the_cores_own_unit_tests_pass_where_no_framework_can_be_imported():
    root = os.path.dirname(PACKAGE)
    tests = []
    for folder in CORE_TESTS:
        for name in sorted(os.listdir(os.path.join(root, "tests", folder))):
            path = os.path.join(root, "tests", folder, name)
            if name.startswith("test_") and name.endswith(".py") and name[:-3] not in LONG and \
                    _core_only(path, "tests.%s.%s" % (folder, name[:-3])):
                tests.append(os.path.join("tests", folder, name))
    assert len(tests) >= 25, tests
    env = dict(os.environ)
    env.pop("TF_USE_LEGACY_KERAS", None)
    done = subprocess.run([sys.executable, "-c", RUN_BLOCKED % (FRAMEWORKS,), "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-m", "not tf1"] + tests, capture_output=True, text=True, cwd=root,
                          env=env, timeout=900)
    tail = done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0 and " passed" in done.stdout and " failed" not in done.stdout, tail
