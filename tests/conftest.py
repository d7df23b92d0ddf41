"""Shared fixtures. The suite runs in both environments: the modern one runs everything,
the legacy one (Python 3.7, TF 1.15) runs what is not marked `modern`."""

from __future__ import annotations

import os

# TF1-style code on TF >= 2.16 needs Keras 2 (tf-keras), chosen before TensorFlow's first import.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if "TRACEKIT_CACHE_DIR" not in os.environ:  # the suite starts cold and leaves the user's cache alone
    import tempfile

    os.environ["TRACEKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="tracekit-test-cache-")

import pytest  # noqa: E402

from tracekit._ci import in_ci  # noqa: E402

from .support import LEGACY_PYTHON  # noqa: E402

pytest_plugins = ["pytester"]  # the plugin's tests run pytest itself (tests/plugin)

try:
    from hypothesis import settings
except ImportError:  # pragma: no cover  # the test extra brings it
    pass
else:
    # No deadline: a test never judges by time (machines differ). No example database: a run does
    # not depend on what an earlier one left in the working directory. CI draws the same examples
    # every run (a failure there reproduces); elsewhere each run explores new ones.
    settings.register_profile("tracekit", deadline=None, database=None,
                              derandomize=in_ci(), print_blob=True)
    settings.load_profile("tracekit")


@pytest.fixture
def all_chunked(monkeypatch):
    """Every array stored chunked, however small, as before small arrays were stored plain: for
    tests that damage or inspect a chunked leaf of a tiny synthetic trace."""
    from tracekit.store import values
    monkeypatch.setattr(values, "PLAIN_MAX_BYTES", 0)


@pytest.fixture(scope="session")
def legacy_python():
    """The legacy environment's interpreter. Absent on a machine without Python 3.7: the
    test is skipped, saying so; in CI (tracekit/_ci.py) its absence fails instead."""
    if os.path.exists(LEGACY_PYTHON):
        return LEGACY_PYTHON
    message = ("legacy environment .venv-legacy not built (no Python 3.7 here; "
               "pyenv install 3.7.16, then tools/bootstrap)")
    if in_ci():
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def ported_family(legacy_python, tmp_path_factory):
    """The generated family's runs every framework's ports replay (tests/replay, tests/torch,
    tests/jax): a folder of its first PORTED_FAMILY runs, PORTED_STEPS steps each, recorded on
    TF 1.15 once per test run."""
    from .support import PORTED_FAMILY, PORTED_STEPS, once, record_family

    return once(tmp_path_factory, "family",
                lambda out: record_family(legacy_python, out, PORTED_FAMILY, PORTED_STEPS))


@pytest.fixture(scope="session")
def long_ported_family(legacy_python, tmp_path_factory):
    """The family's first LONG_FAMILY runs at LONG_STEPS steps (the judged check on a 200-step
    golden), recorded on TF 1.15 once per test run."""
    from .support import LONG_FAMILY, LONG_STEPS, once, record_family

    return once(tmp_path_factory, "long_family",
                lambda out: record_family(legacy_python, out, LONG_FAMILY, LONG_STEPS))


@pytest.fixture(scope="session")
def corpus_bert(legacy_python, tmp_path_factory):
    """google-research/bert's classifier fine-tuned by its own AdamWeightDecayOptimizer (the corpus
    program bert_classifier, its own arguments: 4 steps, dropout on, gradients clipped), recorded on
    TF 1.15 in its legacy environment once per test run: the golden path."""
    from tools.corpus import by_name, record

    from .support import once

    program = by_name("bert_classifier")
    root = os.path.dirname(os.path.dirname(os.path.dirname(legacy_python)))
    python = os.path.join(root, program.env, "bin", "python")
    assert os.path.exists(python), "%s is not built: run tools/bootstrap" % python

    def make(where):
        golden = os.path.join(where, "bert_classifier.h5")
        record(program, python, golden, os.path.join(where, "work"))
        return golden
    return once(tmp_path_factory, "corpus_bert", make)
