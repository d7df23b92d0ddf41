"""A newcomer's first hour, end to end: their own TF1 script (an embedding_lookup table, a dense
layer, dropout, AdamOptimizer, 20 steps) recorded zero-code on TF 1.15, then a pytest project
with a Keras port under layer names of their own, as docs/index.md and docs/FIRST.md show it. With tf-keras the
port passes with the var_map the first failure proposes and nothing else; with Keras 3 the
report names the sparse update that differs; a Keras-default epsilon and a dropout-rate slip are
each named. Each project runs pytest in a child process: the Keras a process gets is decided once."""

from __future__ import annotations

import os
import re
import shutil
import sys

import pytest

from ..support import run_python
from ..support.recording import SCRIPTS

PORT = '''
import tensorflow as tf


def make_port(epsilon=1e-8, dropout=0.3):
    model = tf.keras.Sequential([
        tf.keras.layers.Embedding(30, 6, name="embed"),
        tf.keras.layers.GlobalAveragePooling1D(name="pool"),
        tf.keras.layers.Dense(8, activation="relu", name="hidden"),
        tf.keras.layers.Dropout(dropout, name="drop"),
        tf.keras.layers.Dense(1, name="out"),
    ])
    model.build((None, 5))
    optimizer = tf.keras.optimizers.Adam(0.01, epsilon=epsilon)    # TF1 AdamOptimizer's epsilon
    loss_fn = tf.keras.losses.BinaryCrossentropy(from_logits=True)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = loss_fn(inputs["labels:0"], model(inputs["ids:0"], training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}
    return model, step
'''

CONFTEST = '''
import os
os.environ.setdefault("TF_USE_LEGACY_KERAS", "%s")   # before anything imports TensorFlow
'''

TESTS = '''
from port import make_port

VAR_MAP = %s


def test_port_trains_like_tf1(tracekit_replay):
    model, step = make_port()
    tracekit_replay("train", step, model=model, var_map=VAR_MAP)


def test_keras_default_epsilon(tracekit_replay):
    model, step = make_port(epsilon=1e-7)
    tracekit_replay("train", step, model=model, var_map=VAR_MAP)


def test_dropout_rate(tracekit_replay):
    model, step = make_port(dropout=0.5)
    tracekit_replay("train", step, model=model, var_map=VAR_MAP)
'''


@pytest.fixture(scope="module")
def recorded(legacy_python, tmp_path_factory):
    """goldens/train.h5: the newcomer's script recorded as docs/index.md says, zero-code."""
    path = str(tmp_path_factory.mktemp("newcomer") / "train.h5")
    proc = run_python(legacy_python, ["-m", "tracekit", "record", "-o", path, "--seed", "1", "--steps", "20", "--",
                                      os.path.join(SCRIPTS, "newcomer.py")])
    assert "recorded %s" % path in proc.stderr
    return path


def _project(root, golden, keras, var_map):
    (root / "goldens").mkdir(parents=True, exist_ok=True)
    shutil.copy(golden, str(root / "goldens" / "train.h5"))
    (root / "port.py").write_text(PORT)
    (root / "conftest.py").write_text(CONFTEST % keras)
    (root / "test_port.py").write_text(TESTS % var_map)


def _pytest(root, *args):
    proc = run_python(sys.executable, ["-m", "pytest", "-p", "no:cacheprovider", "-q"] + list(args),
                      check=False, cwd=str(root), unset=("TF_USE_LEGACY_KERAS", "PYTEST_ADDOPTS"), timeout=600)
    return proc.returncode, proc.stdout + proc.stderr


def _proposed(out):
    """The var_map the first failure proposes, as the user pastes it."""
    found = re.search(r"var_map = (\{\n(?:.*\n)*?\s*\})", out)
    assert found, out[-3000:]
    return found.group(1)


def _section(out, test):
    """The failure text of one test."""
    start = out.index("_ %s _" % test)
    end = out.find("\n____", start + 1)
    return out[start:end if end > 0 else None]


@pytest.mark.slow
@pytest.mark.parametrize("keras", ["1", "0"], ids=["tf-keras", "keras-3"])
def test_a_newcomers_port_passes_or_is_told_why(recorded, tmp_path, keras):
    _project(tmp_path, recorded, keras, "None")
    code, out = _pytest(tmp_path, "-k", "trains_like")
    assert code == 1 and "ReplayError: the TF2 variables do not match the golden's:" in out, out[-3000:]
    assert "paired automatically (check them too):" in out and "fc1/kernel:0 -> " in out  # and why
    proposal = _proposed(out)
    assert "embedding/table:0" in proposal
    _project(tmp_path, recorded, keras, proposal)  # pasted, nothing else
    code, out = _pytest(tmp_path)
    assert "WARNING" not in out.split("FAILURES")[0], out  # the Keras is chosen before TensorFlow's import
    if keras == "1":
        assert "1 passed, 2 failed" in out and "FAILED test_port.py::test_port_trains_like_tf1" not in out, out[-6000:]
    else:  # Keras 3's Adam squares each repeated row of the embedding's sparse gradient
        failure = _section(out, "test_port_trains_like_tf1")
        assert "Keras: Keras 3." in failure
        assert "possible cause: a sparse gradient's repeated rows. At step 0" in failure, failure
        assert "slot/embedding/table/Adam_1:0 passes under the absolute tolerance" in failure
    epsilon = _section(out, "test_keras_default_epsilon")
    assert re.search(r"named cause: the optimizer's epsilon\..* fits epsilon=1e-07, TF1's epsilon=1e-08", epsilon) or \
        (keras == "0" and "possible cause: a sparse gradient's repeated rows" in epsilon), epsilon
    dropout = _section(out, "test_dropout_rate")
    assert "hint: the dropout rate." in dropout and "dropped at rate 0.5" in dropout and "TF1 dropped at 0.3" in dropout
    assert re.search(r"random +dropout/random_uniform/RandomUniform:0 +MISUSED", dropout), dropout
    assert "tracekit accept" not in dropout and "fix the port and run again" in dropout
    summary = out[out.index("= tracekit ="):]
    assert "next: fix the port" in summary
