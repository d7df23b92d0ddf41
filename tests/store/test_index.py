"""The step index: one attribute per step describing its values, small ones inline, so a step
of thousands of scalars is listed and read without opening a dataset each. Goldens written
before it (no index) read the same; verify checks the index against the datasets."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import tracekit
from tracekit.store._format import ATTR_INDEX, step_path

from ..support import payloads
from ..support import write_steps


def _strip_index(path):
    with h5py.File(path, "r+") as f:
        for name in ["initial"] + ["steps/%s" % s for s in f["steps"]]:
            del f[name].attrs[ATTR_INDEX]


def test_goldens_with_and_without_an_index_read_alike(tmp_path):
    path = write_steps(str(tmp_path / "g.h5"), 3)
    old = str(tmp_path / "old.h5")
    with open(path, "rb") as src, open(old, "wb") as dst:
        dst.write(src.read())
    _strip_index(old)  # as goldens written before the index
    with h5py.File(path, "r") as f:
        assert ATTR_INDEX in f[step_path(0)].attrs and ATTR_INDEX in f["initial"].attrs
    with tracekit.open(path) as new, tracekit.open(old) as before:
        for a, b in zip([new.initial] + list(new), [before.initial] + list(before)):
            assert list(a) == list(b)
            for key in a:
                assert payloads.same(a[key], b[key]), key
    assert tracekit.verify(path).ok and tracekit.verify(old).ok


def test_many_scalars_are_read_from_the_index(tmp_path):
    path = str(tmp_path / "many.h5")
    with tracekit.create(path) as w:
        with w.step():
            for i in range(500):
                w.add("var", "w%03d:0" % i, np.float32(i) / 7)
            w.add("fetch", "run", {"a": (None, np.int64(3)), "b": []})  # a structure of plain leaves
    with tracekit.open(path) as trace:
        step = trace.step(0)
        assert len(step) == 501 and "var/w499:0" in step  # the index, read
        trace._backend._file.close()  # no dataset can be opened now: the index alone serves
        assert [step["var/w%03d:0" % i] for i in (0, 499)] == [np.float32(0), np.float32(499) / 7]
        assert step["fetch/run"] == {"a": (None, np.int64(3)), "b": []}


def test_index_damage_is_reported(tmp_path):
    path = write_steps(str(tmp_path / "g.h5"), 3)
    with h5py.File(path, "r+") as f:
        f[step_path(1)].attrs[ATTR_INDEX] = np.void(b"\xc1")  # not msgpack
    with tracekit.open(path) as trace:
        with pytest.raises(tracekit.CorruptTrace, match="step 1, list of tensors: cannot be read"):
            list(trace.step(1))
        assert len(list(trace.step(2))) > 0
    problems = tracekit.verify(path).problems
    assert "step 1 cannot be listed" in problems[0] and "step index" in problems[0]


def test_verify_finds_a_dataset_the_index_disagrees_with(tmp_path):
    path = write_steps(str(tmp_path / "g.h5"), 2)
    with h5py.File(path, "r+") as f:
        dataset = f["steps/00000001/loss/loss"]
        crc = dataset.attrs["crc32"]
        dataset[()] = dataset[()] + 1  # other bytes, and a checksum that fits them
        from tracekit.store.values import checksum

        dataset.attrs["crc32"] = np.uint32(checksum(np.asarray(dataset[()])))
        assert dataset.attrs["crc32"] != crc
    problems = tracekit.verify(path).problems
    assert len(problems) == 1 and "step 1, loss/loss: the step index and the dataset disagree" in problems[0]
