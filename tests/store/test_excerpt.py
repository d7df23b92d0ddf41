"""A one-step excerpt of a golden: the state before the step as its initial state, the step whole."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tracekit.store import reader
from tracekit.store.excerpt import write_excerpt

from ..support import build_golden


def _golden(path):
    def steps():
        for k in range(3):
            yield {"input/x:0": np.full(2, k, "f4"), "loss/loss": np.float32(k), "grad/w:0": np.full(2, 0.5, "f4"),
                   "var/w:0": np.full(2, 10.0 + k, "f4"), "slot/w/Adam:0": np.full(2, k / 10, "f4")}
    return build_golden(path, steps(), {"var/w:0": np.full(2, 9.0, "f4"), "slot/w/Adam:0": np.zeros(2, "f4")},
                        meta={"user": {"who": "test"}}, info=lambda k: {"global_step": k + 1})


@pytest.mark.parametrize("step, before", [(0, 9.0), (2, 11.0)])
def test_the_state_before_and_the_step(tmp_path, step, before):
    with tracekit.open(_golden(str(tmp_path / "g.h5"))) as golden:
        out = write_excerpt(golden, step, str(tmp_path / "x.h5"))
    with tracekit.open(out) as excerpt:
        assert len(excerpt) == 1 and excerpt.meta["excerpt"]["step"] == step and excerpt.meta["user"] == {"who": "test"}
        assert np.array_equal(excerpt.initial["var/w:0"], np.full(2, before, "f4"))
        assert set(excerpt.initial) == {"var/w:0", "slot/w/Adam:0"}
        assert excerpt.step(0).info == {"global_step": step + 1}
        assert float(excerpt.step(0)["loss/loss"]) == step and excerpt.meta["environment"]


def test_a_step_that_is_not_there(tmp_path):
    with tracekit.open(_golden(str(tmp_path / "g.h5"))) as golden:
        with pytest.raises(tracekit.UsageError, match="no step 3 to excerpt"):
            write_excerpt(golden, 3, str(tmp_path / "x.h5"))


def test_no_state_before_the_step(tmp_path):
    path = build_golden(str(tmp_path / "n.h5"), iter([{"loss/loss": np.float32(1)}, {"loss/loss": np.float32(2)}]))
    with tracekit.open(path) as golden:
        assert golden.before(0) is None and golden.before(1).index == 0
        with pytest.raises(tracekit.UsageError, match="no variables from before step 0 \\(it has no initial state\\)"):
            write_excerpt(golden, 0, str(tmp_path / "x.h5"))
        with pytest.raises(tracekit.UsageError, match="no variables from before step 1 \\(recorded with every=K\\)"):
            golden.state_before(1)


def test_the_state_view_reads_a_value_only_when_it_is_looked_up(tmp_path, monkeypatch):
    # a value set between the steps (var@before, held by the step) stands over the step before's
    def steps():
        yield {"loss/loss": np.float32(0), "var/w:0": np.full(2, 1.0, "f4"), "slot/w/m:0": np.full(2, 2.0, "f4")}
        yield {"loss/loss": np.float32(1), "var/w:0@before": np.full(2, 7.0, "f4"), "var/new:0@before": np.ones(1, "f4"),
               "var/w:0": np.full(2, 8.0, "f4"), "slot/w/m:0": np.full(2, 3.0, "f4")}
    path = build_golden(str(tmp_path / "b.h5"), steps(), {"var/w:0": np.zeros(2, "f4"), "slot/w/m:0": np.zeros(2, "f4")})
    reads = []
    read = reader.Step.__getitem__
    monkeypatch.setattr(reader.Step, "__getitem__", lambda self, key: reads.append(key) or read(self, key))
    with tracekit.open(path) as golden:
        view = golden.state_view(1)
        assert reads == [] and list(view) == ["var/w:0", "slot/w/m:0", "var/new:0"] and len(view) == 3
        assert view["slot/w/m:0"].tolist() == [2.0, 2.0] and reads == ["slot/w/m:0"]
        assert view["var/w:0"].tolist() == [7.0, 7.0] and "loss/loss" not in view
        whole = golden.state_before(1)
        assert list(whole) == list(view) and all(np.array_equal(whole[k], view[k]) for k in view)
