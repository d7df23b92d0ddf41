"""Both sides' source lines at the first divergence: the TF1 program's line (kept by the
recorder) and the port's (kept by the replay: where it assigned a variable, applied an
optimizer, took a gradient or a tap), in the text report, --json and HTML. The port with Adam's
bias correction against assign_optimizer.py's uncorrected AdamWeightDecay (recorded for real
in TF 1.15), forced from the golden's state: its update fails at step 0, and both lines of that
update are shown, whether the port's step is a tf.function or runs eagerly."""

from __future__ import annotations

import json
import os

import pytest

from ..support.recording import SCRIPTS
from .test_hand_written_optimizer import _port, golden  # noqa: F401  # the recorded golden, the port

PORT = os.path.join(os.path.dirname(__file__), "test_hand_written_optimizer.py")
SCRIPT = os.path.join(SCRIPTS, "assign_optimizer.py")


def _line(path, text):
    with open(path) as handle:
        found = [n for n, line in enumerate(handle, 1) if line.strip().startswith(text)]
    assert len(found) == 1, (path, text, found)
    return found[0]


def _checked(tf2, golden, eager):  # noqa: F811
    model, params, m, v, counter, step = _port(tf2.tf, bias_correction=True)
    return tf2.check(golden, step.python_function if eager else step, variables=params + m + v + [counter],
                     forcing="state")


@pytest.mark.parametrize("eager", [False, True])
def test_the_first_divergence_shows_both_lines(tf2, golden, eager):  # noqa: F811
    result = _checked(tf2, golden, eager)
    first = result.first_divergence
    assert not result.ok and first.step == 0 and first.kind == "var", result.report()
    found = result.sources[first.key]
    assert found.tf1.update[-1].line == _line(SCRIPT, "assignments += [param.assign")
    assert _line(SCRIPT, "update = next_m / (tf.sqrt(next_v)") in [s.line for s in found.tf1.update]
    port, = found.port.update
    assert port.line == _line(PORT, "p.assign(p - lr * (update + 0.01 * p))") and os.path.samefile(port.file, PORT)
    assert port.code == "p.assign(p - lr * (update + 0.01 * p))"
    text = result.report()
    assert "source of %s: TF1 assign_optimizer.py:%d `assignments += [param.assign(" % (
        first.key, found.tf1.update[-1].line) in text
    assert "; port test_hand_written_optimizer.py:%d `p.assign(p - lr * (update + 0.01 * p))`" % port.line in text
    plain = json.loads(json.dumps(result.to_dict(by_step=False)))["sources"][first.key]
    assert plain["port"]["update"][0]["line"] == port.line and plain["tf1"]["made"]["line"] == found.tf1.made.line


def test_the_port_loss_line_is_where_it_is_made_or_differentiated(tf2, golden):  # noqa: F811
    model, params, m, v, counter, step = _port(tf2.tf)
    for function, text in ((step, "loss = tf.reduce_mean(tf.square(model("), (step.python_function,
                                                                               "grads = tape.gradient(loss, params)")):
        with tf2.replay(golden, function, variables=params + m + v + [counter], steps=1) as actual:
            lines = actual.meta["replay"]["sources"]["loss/loss"]["made"]
        assert lines["line"] == _line(PORT, text), (function, lines)


@pytest.mark.modern
def test_the_html_report_shows_both_lines(tf2, golden, tmp_path):  # noqa: F811
    result = _checked(tf2, golden, eager=False)
    page = open(result.write_html(str(tmp_path / "report.html"))).read()
    assert "source of %s: TF1 assign_optimizer.py:" % result.first_divergence.key in page
    assert "port test_hand_written_optimizer.py:%d" % _line(PORT, "p.assign(p - lr * (update") in page
