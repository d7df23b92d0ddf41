"""The TF1 program's lines kept with a recording (tracekit/sources.py, record/sources.py): each
recorded tensor's op, each variable's creation and the lines that compute its update, the
model's forward and backward pass and the learning rate's schedule left out of the update."""

from __future__ import annotations

import os

import tracekit
from tracekit.sources import read_sources

from ..support.recording import SCRIPTS, record_cli

SCRIPT = os.path.join(SCRIPTS, "assign_optimizer.py")


def _line(text):
    """The line number of the statement starting with `text` in assign_optimizer.py."""
    with open(SCRIPT) as handle:
        found = [n for n, line in enumerate(handle, 1) if line.strip().startswith(text)]
    assert len(found) == 1, (text, found)
    return found[0]


def test_each_recorded_tensor_keeps_the_line_that_made_it(tmp_path):
    path = tmp_path / "adamw.h5"
    record_cli(path, "assign_optimizer.py", "--steps", 2, "--ordered")
    with tracekit.open(str(path)) as trace:
        sources = read_sources(trace.meta["sources"])
    assert sources["loss/loss"].made.line == _line("loss = tf.reduce_mean")
    assert sources["loss/loss"].made.code == "loss = tf.reduce_mean(tf.square(out - 1.0))"
    assert os.path.samefile(sources["loss/loss"].made.file, SCRIPT)
    # a call written over two lines is named at its first, with the whole statement
    rate = sources["lr/learning_rate"].made
    assert rate.line == _line("learning_rate = tf.compat.v1.train.polynomial_decay")
    # the gradient the update reads is what tf.clip_by_global_norm made of tf.gradients'
    assert sources["grad/hidden/kernel:0"].made.line == _line("grads, _ = tf.clip_by_global_norm")
    kernel = sources["var/hidden/kernel:0"]
    assert kernel.made.line == _line("hidden = tf.compat.v1.layers.dense")
    update = [source.line for source in kernel.update]
    # the optimizer's lines in the program's order, the assign last; not the model's, not the rate's
    assert update == sorted(update) and update[-1] == _line("assignments += [param.assign")
    assert {_line("next_m = "), _line("next_v = "), _line("update = next_m")} <= set(update)
    assert not {_line("loss = "), _line("learning_rate = "), _line("grads = tf.gradients")} & set(update)
    assert all(os.path.samefile(s.file, SCRIPT) for s in kernel.update)
    # an optimizer slot is updated by the same lines
    assert sources["slot/hidden/kernel/adam_m:0"].update[-1].line == _line("assignments += [param.assign")


def test_tensorflow_frames_are_not_the_users(tmp_path):
    path = tmp_path / "adamw.h5"
    record_cli(path, "assign_optimizer.py", "--steps", 1, "--ordered")
    package = os.path.dirname(tracekit.__file__) + os.sep
    with tracekit.open(str(path)) as trace:
        for key, lines in read_sources(trace.meta["sources"]).items():
            for source in [lines.made] + list(lines.update):
                if source is not None:
                    assert "tensorflow" not in source.file and not source.file.startswith(package), (key, source)
