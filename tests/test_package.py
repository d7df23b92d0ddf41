"""Package-level promises: no TensorFlow on import, sorted public API, the exception tree."""

from __future__ import annotations

import sys

import pytest

import tracekit
import tracekit.errors as errors

from .support import run_python


def test_import_does_not_load_tensorflow():
    code = ("import sys, tracekit, tracekit.cli, tracekit.store, tracekit.report.trace, tracekit.plugin\n"
            "loaded = [m for m in ('tensorflow', 'keras', 'tf_keras') if m in sys.modules]\n"
            "assert not loaded, loaded\n")
    run_python(sys.executable, code)


@pytest.mark.parametrize("module", [tracekit, errors, tracekit.store])
def test_all_is_sorted_and_complete(module):
    assert module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), name


def test_exception_tree():
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.TracekitError)
        assert name in errors.__doc__, "draw %s in the tree in the module docstring" % name
    assert issubclass(errors.GoldenNotFound, FileNotFoundError)
    assert issubclass(errors.CorruptTrace, ValueError)
    assert issubclass(errors.UnsupportedValue, TypeError)
    assert issubclass(errors.TraceWriteError, OSError)
    assert issubclass(errors.SeedReuseError, errors.UsageError)
    assert issubclass(errors.MissingDependency, ImportError)


# Exception classes defined outside errors.py on purpose, and why.
INTERNAL_EXCEPTIONS = {
    "StopRecording": "control flow: stops a recorded script at its step limit (a BaseException)",
    "ChunkError": "store-internal: a damaged chunk, always re-raised as CorruptTrace naming file and tensor",
    "MalformedRecord": "store-internal: a journal record off the schema, re-raised as CorruptTrace naming the file",
    "BadIndex": "store-internal: a step index that decodes but says what no golden says, re-raised as CorruptTrace",
    "HDF5Failure": "store-internal: HDF5 could not read an attribute, re-raised as CorruptTrace (damage HDF5 found)",
    "ChildCrashed": "a forked reader died of a signal: the CLI reports it as CorruptTrace naming the file",
    "NotAuditable": "store-internal: why the update audit cannot judge a variable, caught as its verdict",
}


def test_every_exception_is_in_the_tree_or_internal_on_purpose():
    import ast
    import os

    package = os.path.dirname(tracekit.__file__)
    found = {}
    for folder, _, files in os.walk(package):
        for name in files:
            if not name.endswith(".py") or name == "errors.py":
                continue
            path = os.path.join(folder, name)
            with open(path) as fh:
                tree = ast.parse(fh.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and any(
                        getattr(b, "id", getattr(b, "attr", "")).endswith(("Error", "Exception")) for b in node.bases):
                    found[node.name] = path
    assert set(found) == set(INTERNAL_EXCEPTIONS), "define errors in tracekit/errors.py: %s" % found


def test_version():
    assert tracekit.__version__.count(".") == 2


def test_environment_fingerprint_keeps_numerics_settings_not_secrets(monkeypatch):
    from tracekit.environment import fingerprint

    for name in list(__import__("os").environ):
        monkeypatch.delenv(name)
    kept = {"TF_DETERMINISTIC_OPS": "1", "TF_ENABLE_ONEDNN_OPTS": "0", "CUDA_VISIBLE_DEVICES": "0",
            "OMP_NUM_THREADS": "2", "PYTHONHASHSEED": "0"}
    dropped = {"TF_VAR_db_password": "hunter2", "TF_CLI_CONFIG_FILE": "/root/.terraformrc",
               "TF_TOKEN_app_terraform_io": "abc", "TF_LOG": "DEBUG", "CUDA_API_TOKEN": "x", "HOME": "/root"}
    for name, value in dict(kept, **dropped).items():
        monkeypatch.setenv(name, value)
    assert fingerprint()["env"] == kept


def test_no_name_of_the_package_hides_a_subpackage():
    # `import tracekit.comparison.tolerance as t` resolves attribute by attribute: a function
    # tracekit.X next to a subpackage tracekit/X would break it for every module inside.
    import os
    import subprocess
    import sys

    package = os.path.dirname(tracekit.__file__)
    parts = sorted(name[:-3] if name.endswith(".py") else name for name in os.listdir(package)
                   if (name.endswith(".py") and name != "__init__.py")
                   or os.path.isfile(os.path.join(package, name, "__init__.py")))
    for part in parts:
        value = getattr(tracekit, part, None)
        assert value is None or getattr(value, "__name__", None) == "tracekit." + part, (
            "tracekit.%s is %r, hiding the module tracekit/%s" % (part, value, part))
    code = "import tracekit, tracekit.comparison.tolerance as t, tracekit.store.reader as r; print(t.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "tracekit.comparison.tolerance", done.stderr


def test_a_missing_tensorflow_is_one_line_naming_the_extra(tmp_path):
    # The replay side: importing tracekit.tf2 without TensorFlow.
    code = ("import sys\nsys.modules['tensorflow'] = None  # as if not installed\n"
            "try:\n    import tracekit.tf2\nexcept ImportError as exc:\n    print(type(exc).__name__, exc)\n")
    out = run_python(sys.executable, code).stdout
    assert out.startswith("MissingDependency tracekit.tf2 replays on TensorFlow 2") and "tracekit[tf2]" in out
    # The recording side, through the CLI: one line on stderr, exit 2.
    script = tmp_path / "train.py"
    script.write_text("print('never runs')\n")
    code = ("import sys\nsys.modules['tensorflow'] = None\nfrom tracekit.cli import main\n"
            "sys.exit(main(['record', '-o', %r, '--', %r]))\n" % (str(tmp_path / "out.h5"), str(script)))
    done = run_python(sys.executable, code, check=False)
    assert done.returncode == 2 and "never runs" not in done.stdout
    assert len(done.stderr.strip().splitlines()) == 1 and "pip install 'tracekit[legacy]'" in done.stderr


@pytest.mark.modern
def test_a_missing_tf_keras_is_named_before_a_model_touches_it():
    code = ("import os, sys\nos.environ['TF_USE_LEGACY_KERAS'] = '1'\nsys.modules['tf_keras'] = None\n"
            "try:\n    import tracekit.tf2\nexcept ImportError as exc:\n    print(type(exc).__name__, exc)\n")
    out = run_python(sys.executable, code).stdout
    assert out.startswith("MissingDependency TF_USE_LEGACY_KERAS=1 selects Keras 2, but tf-keras is not installed")


def test_what_pip_installs():
    """The extras keep TensorFlow and tf-keras in step, name the legacy stack, and register the plugin."""
    import os

    from .support import ROOT

    try:
        import tomllib
    except ImportError:  # Python 3.7
        import tomli as tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        project = tomllib.load(fh)["project"]
    extras = project["optional-dependencies"]
    tf2 = {req.split(">=")[0]: req for req in extras["tf2"]}
    assert set(tf2) == {"tensorflow", "tf-keras"}
    bounds = {name: req.split(",")[1] for name, req in tf2.items()}  # the same upper bound, both
    assert len(set(bounds.values())) == 1 and next(iter(bounds.values())).startswith("<")
    assert any(r.startswith("tensorflow==1.15.5") for r in extras["legacy"])
    assert any(r.startswith("protobuf<3.21") for r in extras["legacy"])
    assert any(r.startswith("pytest-xdist") for r in extras["test"])
    assert project["entry-points"]["pytest11"] == {"tracekit": "tracekit.plugin"}
    assert any(r.startswith("tomli") and "python_version < '3.11'" in r for r in project["dependencies"])


def test_the_plugin_stays_out_of_the_way_under_an_old_pytest():
    # Legacy projects may pin a pytest older than 7; the entry point loads there too.
    code = ("import pytest\npytest.__version__ = '6.2.5'\nimport tracekit.plugin as plugin\n"
            "print(sorted(name for name in vars(plugin) if name.startswith(('pytest_', 'tracekit_'))))\n")
    assert run_python(sys.executable, code).stdout.strip() == "[]"
