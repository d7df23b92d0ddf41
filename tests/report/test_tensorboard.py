"""tracekit export --tensorboard: a golden and its replay as two TensorBoard runs, read back."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tracekit
from tracekit.cli import main
from tracekit.report.tensorboard import read_scalars

from ..comparison.test_compare import write

pytestmark = pytest.mark.modern  # TensorFlow 2's summary writer


@pytest.fixture
def pair(tmp_path):
    golden = write(str(tmp_path / "golden.h5"), steps=6)

    def change(step, key, value):
        if key == "loss/loss" and step >= 3:
            return value + np.float32(0.25)
        if key == "var/dense/kernel:0":
            return value * np.float32(2.0)
        return value
    return golden, write(str(tmp_path / "actual.h5"), change=change, steps=6)


def test_two_runs_overlay_what_each_trace_holds_and_the_errors(pair, tmp_path, capsys):
    golden, actual = pair
    out = str(tmp_path / "tb")
    assert main(["export", golden, actual, "--tensorboard", out]) == 0
    assert "run golden with" in capsys.readouterr().out
    runs = read_scalars(out)
    assert set(runs) == {"golden", "actual"}
    g, a = runs["golden"], runs["actual"]
    with tracekit.open(golden) as trace:
        losses = [float(v) for v in trace.series("loss", "loss")]
        kernels = [np.asarray(v, np.float64) for v in trace.series("var", "dense/kernel:0")]
    assert [s for s, _ in g["loss/loss"]] == list(range(6))
    assert np.allclose([v for _, v in g["loss/loss"]], losses)
    assert np.allclose([v for _, v in a["loss/loss"]], [x + 0.25 * (i >= 3) for i, x in enumerate(losses)])
    assert np.allclose([v for _, v in g["norm/dense/kernel:0"]], [np.linalg.norm(k) for k in kernels], rtol=1e-6)
    assert np.allclose([v for _, v in a["norm/dense/kernel:0"]], [2 * np.linalg.norm(k) for k in kernels], rtol=1e-6)
    assert "lr/learning_rate" in g and not any(tag.startswith("error_") for tag in g)
    loss_errors = dict(a["error_abs/loss"])
    assert loss_errors[2] == 0 and loss_errors[3] == pytest.approx(0.25)
    assert dict(a["error_rel/var"])[0] == pytest.approx(1.0)


def test_the_golden_alone_and_bad_requests(pair, tmp_path, capsys):
    golden, actual = pair
    out = str(tmp_path / "tb")
    assert main(["export", golden, "--tensorboard", out]) == 0
    assert set(read_scalars(out)) == {"golden"}
    assert main(["export", golden]) == 2
    assert "--npz OUT.npz, --tensorboard DIR" in capsys.readouterr().err
    assert main(["export", golden, actual, "--npz", str(tmp_path / "x.npz")]) == 2
    open(str(tmp_path / "file"), "w").close()
    assert main(["export", golden, "--tensorboard", str(tmp_path / "file")]) == 2
    assert "is a file" in capsys.readouterr().err
    assert main(["export", golden, "--npz", str(tmp_path / "x.npz"), "--tensorboard", str(tmp_path / "both")]) == 0
    assert os.path.exists(str(tmp_path / "x.npz")) and set(read_scalars(str(tmp_path / "both"))) == {"golden"}


def test_a_shipped_golden_and_the_other_machines_copy(tmp_path):
    from ..support import FOREIGN_GOLDENS, golden

    out = str(tmp_path / "tb")
    assert main(["export", golden("seed_example"), os.path.join(FOREIGN_GOLDENS, "seed_example.h5"),
                 "--tensorboard", out]) == 0
    runs = read_scalars(out)
    assert len(runs["golden"]["loss/loss"]) == len(runs["actual"]["loss/loss"]) == 100
    assert 0 < max(v for _, v in runs["actual"]["error_abs/loss"]) < 1e-6  # round-off between the two CPUs
