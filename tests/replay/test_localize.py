"""tracekit.tf2.localize and `tracekit localize`: the first step whose own error exceeds the
tolerance, the first tensor in it, and a one-step reproduction that itself fails; drift alone
is told apart from a step that computes differently."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import pytest

import tracekit
from tracekit.cli import main
from tracekit.judge.reproduction import write_script
from tools.ports import estimator_model, momentum_model

from ..support import ROOT, golden
from .test_ports import WRONG


def test_a_wrong_port_is_localized_with_a_reproduction_that_fails(tf2, tmp_path):
    found = tf2.localize(golden("estimator_model"), functools.partial(estimator_model.make, bn_momentum=0.99),
                         out=str(tmp_path))
    assert not found.ok and (found.step, found.key) == (0, "var/bn/moving_mean:0")
    assert found.reproduces is True and found.script is None  # a partial has no importable name
    # Keras Adam's slots and its step counter are loaded at its first update, and read back there
    assert "it loaded and read back 8 variables, 12 slots and 1 counter of the step's starting state" in \
        found.reproduced
    assert found.state.loaded is not None
    with tracekit.open(found.reproduction) as repro:
        assert len(repro) == 1 and repro.meta["excerpt"]["step"] == 0
    assert "first local error: step 0, var/bn/moving_mean:0 (updated variables)" in found.report()


def test_a_later_step_that_computes_differently(tf2, tmp_path):
    # Keras SGD(momentum) parts from TF1's rule where the golden's learning rate first halves.
    found = tf2.localize(golden("momentum_model"), functools.partial(momentum_model.make, optimizer="keras"),
                         out=str(tmp_path), tolerance="default")
    with tracekit.open(golden("momentum_model")) as g:
        rates = [float(g.step(k)["lr/learning_rate"]) for k in range(len(g))]
    change = next(k for k in range(1, len(rates)) if rates[k] != rates[k - 1])
    assert found.step == change and found.key.startswith("var/") and found.reproduces
    with tracekit.open(found.reproduction) as repro:
        assert repro.step(0).info == tracekit.open(golden("momentum_model")).step(change).info


def test_drift_alone_is_not_a_local_error(tf2, tmp_path):
    # The correct Estimator port drifts past the default tolerance at step 13; no step on its own does.
    found = tf2.localize(golden("estimator_model"), estimator_model.make, tolerance="default")
    assert found.ok and found.drift_before and found.reproduction is None
    assert not found.plain.ok and found.state.ok
    drifted = found.plain.first_divergence.step
    assert "every step matches on its own: the failure at step %d is drift" % drifted in found.report()
    data = json.loads(json.dumps(found.to_dict(), allow_nan=False))
    assert data["ok"] and data["drift_before"] and data["plain"]["verdict"] == "MISMATCH"
    assert data["state"]["verdict"] == "MATCH" and data["state"]["forcing"] == "state"
    pytest.importorskip("matplotlib", reason="the HTML report needs matplotlib (tracekit[report])")
    page = open(found.write_html(str(tmp_path / "drift.html")), encoding="utf-8").read()
    assert "Local error: every step from the golden's state (forcing=state)" in page
    assert page.count("data:image/png;base64,") == 2  # the accumulated and the local heatmap


def test_the_command_line_writes_a_script_that_replays_the_step(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_port.py").write_text(
        "from tools.ports import seed_example\n\n\ndef relu_port():\n    return seed_example.make(activation='relu')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(ROOT)
    out = str(tmp_path / "repro")
    assert main(["localize", golden("seed_example"), "my_port:relu_port", "--out", out, "--steps", "3"]) == 1
    text = capsys.readouterr().out
    assert "first local error: step 0, tap/layer1 (taps)" in text and "replay it with: python" in text
    script = os.path.join(out, "seed_example-step0.py")
    proc = subprocess.run([sys.executable, script], cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, str(tmp_path)])), timeout=300,
                          universal_newlines=True)
    assert proc.returncode == 1 and proc.stdout.startswith("MISMATCH"), proc.stderr[-2000:]
    assert "first divergence: step 0, tap/layer1" in proc.stdout
    assert main(["localize", golden("seed_example"), "my_port:relu_port", "--steps", "2", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert (data["step"], data["key"], data["reproduces"]) == (0, "tap/layer1", True)
    assert main(["localize", golden("seed_example"), "my_port"]) == 2
    assert main(["localize", golden("seed_example"), "no_such_module:f"]) == 2
    assert "cannot load the port" in capsys.readouterr().err


@pytest.mark.parametrize("case", list(WRONG))
def test_every_wrong_port_is_localized_where_it_departs(tf2, case, tmp_path):
    name, make, options, replay_options, (step, kind, tensor) = WRONG[case]
    found = tf2.localize(golden(name), functools.partial(make, **options), out=str(tmp_path), steps=3,
                         tolerance="default", **replay_options)
    assert (found.step, found.key) == (step, "%s/%s" % (kind, tensor)), found.report()
    assert found.reproduces, found.report()  # the one-step golden fails too


def test_the_script_carries_the_replay_options_it_can_write(tf2, tmp_path):
    script = write_script(str(tmp_path / "g-step3.h5"), estimator_model.make, "default",
                          {"random": "none", "var_map": lambda name: name})
    text = open(script).read()
    assert "from tools.ports.estimator_model import make" in text and "tolerance='default', random='none'," in text
    assert "# localize also had var_map: pass them here as it got them" in text
    assert write_script(str(tmp_path / "h.h5"), functools.partial(estimator_model.make), None, {}) is None
    policy = tracekit.Tolerance.training().rule(kind="loss", steps=(None, 2), atol=0)  # a Tolerance: written beside
    text = open(write_script(str(tmp_path / "g-step3.h5"), estimator_model.make, policy, {})).read()
    written = str(tmp_path / "g-step3.tolerance.toml")
    assert "tolerance=tracekit.Tolerance.load(%r)" % written in text
    loaded = tracekit.Tolerance.load(written)
    assert all(loaded.resolve("loss", "loss", k, "float32") == policy.resolve("loss", "loss", k, "float32")
               for k in (-1, 0, 1, 2, 3))
