"""A JAX port through tracekit's other entry points: `tracekit check GOLDEN MODULE:FUNCTION`
(with no TensorFlow or PyTorch to import) and the pytest plugin's fixture."""

from __future__ import annotations

import sys

import pytest

from tools.ports.jax import keras_fit

from ..support import ROOT, golden, run_python

# The CLI in a fresh interpreter where importing TensorFlow or PyTorch fails: a JAX port's check needs neither.
NO_OTHER_FRAMEWORK = """
import runpy, sys
for name in ("tensorflow", "tf_keras", "keras", "torch"):
    sys.modules[name] = None  # as if not installed: importing it raises, importlib.util.find_spec finds none
sys.argv = ["tracekit"] + sys.argv[1:]
runpy.run_module("tracekit", run_name="__main__")
"""


@pytest.mark.parametrize("factory, code, said", [
    ("make", 0, "MATCH"),
    ("make_with_optax_adam", 1, "Adam's epsilon added after the bias correction"),
])
def test_tracekit_check_judges_a_jax_factory_without_tensorflow(tj, factory, code, said):
    done = run_python(sys.executable, ["-c", NO_OTHER_FRAMEWORK, "check", golden("keras_fit"),
                                       "tools.ports.jax.keras_fit:" + factory, "--profile", "training"],
                      check=False, cwd=ROOT)
    out = done.stdout + done.stderr
    assert done.returncode == code and said in out, out[-3000:]


@pytest.mark.tracekit(tolerance="training")
def test_the_pytest_fixture_replays_a_jax_port(tj, tracekit_replay):
    state, step = keras_fit.make()
    result = tracekit_replay("keras_fit", step, model=state)
    assert result.ok and result.steps == 16 and "jax" in tracekit_replay.actual.meta, result.report()
    made = tracekit_replay("keras_fit", make_port=keras_fit.make)
    assert made.ok, made.report()
