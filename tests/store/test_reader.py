"""tracekit.open: the read API, laziness, and the catalog."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import tracekit
from tracekit.store import FORMAT_VERSION

from ..support import build_golden, payloads
from ..support import write_steps


def test_api(small_golden):
    with tracekit.open(small_golden) as trace:
        assert len(trace) == 5
        assert trace.format_version == FORMAT_VERSION and trace.producer.startswith("tracekit ")
        assert trace.names("var") == ["dense/kernel:0", "global_step:0"]
        assert trace.names(tracekit.Kind.GRAD) == ["dense/kernel:0"]
        assert trace.step(-1).index == 4
        with pytest.raises(IndexError, match="has 5 steps; step 5 does not exist"):
            trace.step(5)
        step = trace.step(2)
        assert "loss/loss" in step and "loss/nope" not in step
        assert step.names("var") == ["dense/kernel:0", "global_step:0"]
        assert step.get_value("var", "global_step:0") == 3
        with pytest.raises(KeyError, match="step 2 has no loss/nope"):
            step["loss/nope"]
        with pytest.raises(KeyError, match="not a tensor key"):
            step["loss"]
        with pytest.raises(tracekit.UsageError, match="unknown tensor kind 'bogus'"):
            step["bogus/x"]
        series = trace.series("lr", "learning_rate")
        assert series.steps == [0, 1, 2, 3, 4]
        assert np.asarray(series).shape == (5,)
        assert np.allclose(np.asarray(series), [1e-3 * (1 - k / 1000.0) for k in range(5)])
        with pytest.raises(KeyError, match="has no tensor grad/nope"):
            trace.series("grad", "nope")
        info = trace.info("grad", "dense/kernel:0")
        assert info.shape == (3, 60) and info.dtype == "float32" and info.steps == 5 and not info.initial
        assert trace.info("var", "dense/kernel:0").initial
        assert trace.info("fetch", "train").dtype == "structure"
        # One key or (kind, name), everywhere; a near miss is named.
        assert trace.info("grad/dense/kernel:0") is trace.info("grad", "dense/kernel:0")
        assert trace.series("lr/learning_rate").steps == series.steps
        assert step["var", "global_step:0"] == step["var/global_step:0"] == 3
        with pytest.raises(KeyError, match="did you mean var/global_step:0"):
            step["var/global_step"]
        with pytest.raises(KeyError, match="did you mean grad/dense/kernel:0"):
            trace.series("grad/dense/kernel")


def test_catalog_sizes_add_up(small_golden):
    with tracekit.open(small_golden) as trace:
        info = trace.info("grad", "dense/kernel:0")
        assert info.raw_bytes == 5 * 3 * 60 * 4
        assert 0 < info.stored_bytes <= info.raw_bytes + 64 * 5


def test_reads_are_lazy(tmp_path):
    """Opening and reading one tensor never touches the others: damage elsewhere is not seen."""
    path = write_steps(str(tmp_path / "lazy.h5"), 3, big=True)
    with h5py.File(path, "r") as f:
        _, payload = f["steps/00000001/grad/dense%2Fkernel:0"].id.read_direct_chunk((0, 0))
    with open(path, "rb") as fh:
        content = fh.read()
    at = content.find(payload)
    assert at > 0 and content.count(payload) == 1
    with open(path, "r+b") as fh:  # overwrite the chunk of step 1's gradient with garbage
        fh.seek(at)
        fh.write(b"\xAB" * len(payload))
    with tracekit.open(path) as trace:
        assert payloads.same(trace.step(1)["tap/dense/Relu:0"], payloads.step_values(1, True)["tap/dense/Relu:0"])
        assert payloads.same(trace.step(2)["grad/dense/kernel:0"], payloads.step_values(2, True)["grad/dense/kernel:0"])
        with pytest.raises(tracekit.CorruptTrace, match="step 1, grad/dense/kernel:0"):
            trace.step(1)["grad/dense/kernel:0"]


def test_empty_initial_state(tmp_path):
    path = str(tmp_path / "noinit.h5")
    with tracekit.create(path) as w:
        with w.step():
            w.add("loss", "l", 1.0)
    with tracekit.open(path) as trace:
        assert not trace.has_initial and dict(trace.initial) == {} and trace.initial.info == {}


def test_zero_steps(tmp_path):
    path = str(tmp_path / "empty.h5")
    tracekit.create(path).close()
    with tracekit.open(path) as trace:
        assert len(trace) == 0 and list(trace) == [] and trace.complete and trace.catalog == []
    assert tracekit.verify(path).ok


def test_shape_varying_tensor(tmp_path):
    path = str(tmp_path / "vary.h5")
    with tracekit.create(path) as w:
        for n in (4, 4, 2):  # a last, smaller batch
            with w.step():
                w.add("input", "x:0", np.ones((n, 3), "f4"))
    with tracekit.open(path) as trace:
        assert trace.info("input", "x:0").shape is None
        assert [v.shape for v in trace.series("input", "x:0")] == [(4, 3), (4, 3), (2, 3)]
        with pytest.raises(ValueError):
            trace.series("input", "x:0").stack()


def test_a_gradient_kept_as_rows_is_read_in_its_variables_shape(tmp_path):
    # an embedding's gradient as its update consumed it (rows, an id as often as it was looked up)
    rows = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    path = build_golden(str(tmp_path / "rows.h5"), [
        {"grad/table:0/values": rows, "grad/table:0/indices": np.array([2, 0, 2]),
         "var/table:0": np.zeros((4, 2), np.float32), "grad/dense:0": np.ones(3, np.float32)},
        {"grad/table:0/values": rows[:1], "grad/table:0/indices": np.array([1])}])
    with tracekit.open(path) as trace:
        np.testing.assert_array_equal(trace.step(0).gradient("table:0"), [[3, 4], [0, 0], [6, 8], [0, 0]])
        np.testing.assert_array_equal(trace.step(0).gradient("dense:0"), np.ones(3))
        np.testing.assert_array_equal(trace.step(1).gradient("table:0", (4, 2)), [[0, 0], [1, 2], [0, 0], [0, 0]])
        with pytest.raises(tracekit.UsageError, match="step 1 keeps the gradient of table:0 as rows"):
            trace.step(1).gradient("table:0")
        with pytest.raises(tracekit.TraceFormatError, match="indices 1..1 are outside its variable's 1 rows"):
            trace.step(1).gradient("table:0", (1, 2))
