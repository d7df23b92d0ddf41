"""A PyTorch port through tracekit's other entry points: `tracekit check GOLDEN MODULE:FUNCTION`
(with no TensorFlow to import) and the pytest plugin's fixture."""

from __future__ import annotations

import sys

import pytest

from tools.ports.torch import keras_fit

from ..support import ROOT, golden, run_python

# The CLI in a fresh interpreter where importing TensorFlow fails: a PyTorch port's check needs none.
NO_TENSORFLOW = """
import runpy, sys
for name in ("tensorflow", "tf_keras", "keras"):
    sys.modules[name] = None  # as if not installed: importing it raises, importlib.util.find_spec finds none
sys.argv = ["tracekit"] + sys.argv[1:]
runpy.run_module("tracekit", run_name="__main__")
"""


@pytest.mark.parametrize("factory, code, said", [
    ("make", 0, "MATCH"),
    ("make_with_torch_adam", 1, "Adam's epsilon added after the bias correction"),
])
def test_tracekit_check_judges_a_pytorch_factory_without_tensorflow(tt, factory, code, said):
    done = run_python(sys.executable, ["-c", NO_TENSORFLOW, "check", golden("keras_fit"),
                                       "tools.ports.torch.keras_fit:" + factory, "--profile", "training"],
                      check=False, cwd=ROOT)
    out = done.stdout + done.stderr
    assert done.returncode == code and said in out, out[-3000:]


@pytest.mark.tracekit(tolerance="training")
def test_the_pytest_fixture_replays_a_pytorch_port(tt, tracekit_replay):
    model, step, own = keras_fit.make()
    result = tracekit_replay("keras_fit", step, model=model, **own)
    assert result.ok and result.steps == 16 and "torch" in tracekit_replay.actual.meta, result.report()
    made = tracekit_replay("keras_fit", make_port=keras_fit.make)
    assert made.ok, made.report()
