"""The step index: one blob per step describing its values, small ones inline, so a step of
thousands of scalars is listed and read without opening a dataset each (format 2 keeps it in
the step's block of steps, format 1 in an attribute of its group). Goldens of format 1, and those
written before the index, read the same; verify checks the index against the datasets."""

from __future__ import annotations

import shutil

import h5py
import numpy as np
import pytest

import tracekit
from tracekit.store import FORMAT_VERSION
from tracekit.store._format import ATTR_INDEX, step_path, value_path

from ..support import payloads
from ..support import write_steps
from ..support.layout import as_format1, set_blob


def _strip_index(path):
    with h5py.File(path, "r+") as f:
        for name in ["initial"] + ["steps/%s" % s for s in f["steps"]]:
            del f[name].attrs[ATTR_INDEX]


def test_goldens_of_both_formats_with_and_without_an_index_read_alike(tmp_path):
    path = write_steps(str(tmp_path / "g.h5"), 3)
    format1, old = str(tmp_path / "format1.h5"), str(tmp_path / "old.h5")
    shutil.copyfile(path, format1)
    as_format1(format1)
    shutil.copyfile(format1, old)
    _strip_index(old)  # as goldens written before the index
    with h5py.File(format1, "r") as f:
        assert ATTR_INDEX in f[step_path(0)].attrs and ATTR_INDEX in f["initial"].attrs
    with tracekit.open(path) as new:
        assert new.format_version == FORMAT_VERSION == 4
        for other in (format1, old):
            with tracekit.open(other) as before:
                assert before.format_version == 1
                for a, b in zip([new.initial] + list(new), [before.initial] + list(before)):
                    assert list(a) == list(b) and a.info == b.info
                    for key in a:
                        assert payloads.same(a[key], b[key]), key
    assert all(tracekit.verify(p).ok for p in (path, format1, old))


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


@pytest.mark.parametrize("version", [1, 2])
def test_index_damage_is_reported(tmp_path, version):
    path = write_steps(str(tmp_path / "g.h5"), 3)
    if version == 1:
        as_format1(path)
    with h5py.File(path, "r+") as f:
        set_blob(f, 1, "index", b"\xc1")  # not msgpack, with a checksum to match
    with tracekit.open(path) as trace:
        with pytest.raises(tracekit.CorruptTrace, match="step 1, list of tensors: cannot be read"):
            list(trace.step(1))
        assert len(list(trace.step(2))) > 0
    problems = tracekit.verify(path).problems
    assert "step 1 cannot be listed" in problems[0] and "step index" in problems[0]


def test_verify_finds_a_dataset_the_index_disagrees_with(tmp_path):
    path = as_format1(write_steps(str(tmp_path / "g.h5"), 2))  # format 2 keeps a plain leaf in its index alone
    with h5py.File(path, "r+") as f:
        dataset = f["steps/00000001/loss/loss"]
        crc = dataset.attrs["crc32"]
        dataset[()] = dataset[()] + 1  # other bytes, and a checksum that fits them
        from tracekit.store.values import checksum

        dataset.attrs["crc32"] = np.uint32(checksum(np.asarray(dataset[()])))
        assert dataset.attrs["crc32"] != crc
    problems = tracekit.verify(path).problems
    assert len(problems) == 1 and "step 1, loss/loss: the step index and the dataset disagree" in problems[0]


def test_small_arrays_are_plain_and_read_from_the_index(tmp_path, monkeypatch):
    # Up to PLAIN_MAX_BYTES an array is stored uncompressed and inline in the index (a bias, a
    # batch-norm scale): reading it opens no dataset. Larger ones stay chunked; both read back bit
    # for bit, and so does the same trace written with every array chunked (older goldens).
    from tracekit.store import values

    limit = values.PLAIN_MAX_BYTES
    items = {"var/bias:0": np.linspace(-1, 1, limit // 4, dtype=np.float32),
             "var/kernel:0": np.arange(limit // 4 + 1, dtype=np.float32).reshape(1, -1),
             "slot/bn/moving_mean:0": np.arange(24, dtype=np.float64).reshape(2, 3, 4),
             "input/y:0": np.array([3, 1, 2], dtype=np.int64), "input/mask:0": np.array([True, False]),
             "fetch/names": np.array([b"ab", b"cde"], dtype=object), "tap/empty": np.zeros((0, 5), np.float32)}
    paths = {"now": str(tmp_path / "now.h5"), "chunked": str(tmp_path / "chunked.h5")}
    for label, path in paths.items():
        if label == "chunked":
            monkeypatch.setattr(values, "PLAIN_MAX_BYTES", 0)
        with tracekit.create(path) as w:
            for k in range(2):  # the second step's kernel is an XOR delta of the first's
                with w.step():
                    for key, value in items.items():
                        w.add(*key.split("/", 1), value=value + k if value.dtype.kind == "f" else value)
        monkeypatch.undo()
    with h5py.File(paths["now"], "r") as f:  # a plain leaf has no dataset of its own
        stored = [key for key in items if value_path(0, *key.split("/", 1)) in f]
        assert stored == ["var/kernel:0"] and f[value_path(0, "var", "kernel:0")].chunks is not None
    for path in paths.values():
        assert tracekit.verify(path).ok
        with tracekit.open(path) as trace:
            got = [{key: trace.step(k)[key] for key in items} for k in range(2)]
            if path == paths["now"]:
                trace._backend._file.close()  # the plain ones come from the index alone
                again = trace.step(1)
                assert all(payloads.same(again[key], got[1][key]) for key in items if key != "var/kernel:0")
        for k in range(2):
            for key, value in items.items():
                assert payloads.same(got[k][key], value + k if value.dtype.kind == "f" else value), (path, k, key)
