"""Goldens are standard HDF5: h5py + hdf5plugin read them without tracekit, and the two
environments read each other's files."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tracekit
from tracekit.store import FORMAT_VERSION

from ..support import run_python
from ..support import payloads
from ..support import write_steps

WRITE_CASES = """
import sys, tracekit
from tests.support import payloads
with tracekit.create(sys.argv[1]) as w:
    with w.step():
        for name, value in payloads.dtype_cases().items():
            w.add("fetch", name, value)
        for name, value in payloads.scalar_cases().items():
            w.add("loss", name, value)
        w.add("fetch", "structure", payloads.structure_case())
"""

CHECK_CASES = """
import sys, tracekit
from tests.support import payloads
with tracekit.open(sys.argv[1]) as t:
    step = t.step(0)
    cases = list(payloads.dtype_cases().items())
    bad = [n for n, v in cases if not payloads.same(v if v.dtype.kind == "O" else v.copy(order="C"),
                                                    step["fetch/" + n])]
    bad += [n for n, v in payloads.scalar_cases().items() if not payloads.same(v, step["loss/" + n])]
    if not payloads.same(payloads.structure_case(), step["fetch/structure"]):
        bad.append("structure")
    print("mismatch:", bad)
    sys.exit(1 if bad else 0)
assert tracekit.verify(sys.argv[1]).ok
"""


@pytest.mark.modern
@pytest.mark.usefixtures("all_chunked")
def test_hdf5plugin_reads_goldens_transparently(tmp_path):
    import h5py
    import hdf5plugin  # noqa: F401  # registers the Zstandard filter with HDF5

    path = str(tmp_path / "plugin.h5")
    with tracekit.create(path, delta=False) as w:
        with w.step():
            for name, value in payloads.dtype_cases().items():
                w.add("fetch", name, value)
    checked = 0
    with tracekit.open(path) as trace, h5py.File(path, "r") as f:
        step = trace.step(0)
        for name in trace.names("fetch"):
            ds = f.get("steps/00000000/fetch/" + name.replace("%", "%25").replace("/", "%2F"))
            if ds is None or ds.chunks is None or "logical_dtype" in ds.attrs:
                continue  # in the step's index, not a zstd dataset, or bits of a dtype HDF5 has no type for
            ours = step["fetch/" + name]
            theirs = ds[()]
            assert theirs.dtype == ours.dtype and theirs.tobytes() == ours.tobytes(), name
            checked += 1
    assert checked >= 15  # every numeric family, multi-chunk, wide rows, incompressible chunks


@pytest.mark.modern
def test_hdf5plugin_reads_a_legacy_golden(tmp_path, legacy_python):
    import h5py
    import hdf5plugin  # noqa: F401

    path = str(tmp_path / "legacy.h5")
    run_python(legacy_python, ["-c", WRITE_CASES, path])
    with h5py.File(path, "r") as f:
        ds = f["steps/00000000/fetch/multi-chunk"]
        assert ds.chunks is not None and ds[()].tobytes() == payloads.dtype_cases()["multi-chunk"].tobytes()
        producer = f.attrs["producer"].decode()  # fixed-length (header-stored) strings read as bytes
        assert producer.startswith("tracekit") and "3.7" in producer


@pytest.mark.modern  # the modern run drives the legacy interpreter
def test_legacy_writes_modern_reads(tmp_path, legacy_python):
    path = str(tmp_path / "legacy.h5")
    run_python(legacy_python, ["-c", WRITE_CASES, path])
    run_python(os.sys.executable, ["-c", CHECK_CASES, path])


@pytest.mark.modern  # the modern run drives the legacy interpreter
def test_modern_writes_legacy_reads(tmp_path, legacy_python):
    path = str(tmp_path / "modern.h5")
    run_python(os.sys.executable, ["-c", WRITE_CASES, path])
    run_python(legacy_python, ["-c", CHECK_CASES, path])


@pytest.mark.modern  # the modern run drives the legacy interpreter
def test_legacy_recovers_and_modern_reads(tmp_path, legacy_python):
    """A journal left by a killed legacy writer is readable and recoverable in the modern world."""
    path = str(tmp_path / "journal.h5")
    code = ("import os, sys, tracekit\n"
            "sys.path.insert(0, '.')\n"
            "from tests.support import write_steps\n"
            "w = tracekit.create(sys.argv[1])\n"
            "for k in range(3):\n"
            "    with w.step():\n"
            "        w.add('loss', 'loss', float(k))\n"
            "w.flush()\n"
            "os._exit(0)  # dies without closing\n")
    run_python(legacy_python, ["-c", code, path])
    with tracekit.open(path) as trace:
        assert not trace.complete and len(trace) == 3
    assert tracekit.recover(path).steps == 3
    with tracekit.open(path) as trace:
        assert trace.complete and trace.recovered and [s["loss/loss"] for s in trace] == [0.0, 1.0, 2.0]


def test_big_golden_compresses_and_reads(tmp_path):
    path = write_steps(str(tmp_path / "big.h5"), 4, big=True)
    with tracekit.open(path) as trace:
        info = trace.info("var", "dense/kernel:0")
        assert info.stored_bytes < info.raw_bytes  # delta + shuffle + zstd helps slowly changing weights
        assert np.array_equal(trace.step(3)["var/dense/kernel:0"], payloads.step_values(3, True)["var/dense/kernel:0"])


@pytest.mark.modern
def test_docs_format_is_enough_to_read_a_golden(tmp_path):
    """Read every tensor with h5py + hdf5plugin + msgpack, following docs/FORMAT.md alone."""
    import h5py
    import hdf5plugin  # noqa: F401
    import msgpack

    path = write_steps(str(tmp_path / "doc.h5"), 10)  # long enough for delta chains

    def plain_read(f, path):
        ds = f[path]
        data = ds[()]
        base = ds.attrs.get("delta_base")
        if base is not None:  # XOR of the raw bits with the base snapshot
            prev = plain_read(f, base.decode())
            width = "u%d" % data.dtype.itemsize
            data = (data.view(width) ^ prev.view(width)).view(data.dtype)
        return data

    def unpack(data):
        return msgpack.unpackb(data, raw=False, strict_map_key=False)

    with open(path, "rb") as fh:
        assert fh.read(16) == b"TRACEKIT golden\n"
    with h5py.File(path, "r") as f, tracekit.open(path) as trace:
        assert f.attrs["tracekit_format"] == FORMAT_VERSION
        meta = unpack(f["meta"][()].tobytes())
        assert meta["user"] == {"test": True} and len(meta["catalog"]) == len(trace.catalog)
        steps = []  # each step's [step, info, index], block after block
        for first in sorted(f["blocks"], key=int):
            block = unpack(f["blocks/" + first][()].tobytes())
            assert len(block) == f["blocks/" + first].attrs["steps"]
            steps.extend(block)
        assert [entry[0] for entry in steps] == list(range(f.attrs["steps"]))
        for k, info, index in steps:
            assert unpack(info) == {"global_step": k + 1}
            entries = {(kind, name): (spec, leaves) for kind, name, spec, leaves in unpack(index)}
            for key, value in payloads.step_values(k).items():
                kind, name = key.split("/", 1)
                link = "steps/%08d/%s/%s" % (k, kind, name.replace("%", "%25").replace("/", "%2F"))
                spec, leaves = entries[(kind, name)]

                def leaf(i):
                    desc = leaves[i]
                    if desc["l"] == "plain":  # its bytes are in the index
                        return np.frombuffer(desc["v"], dtype=desc["dt"]).reshape(desc["sh"])
                    return plain_read(f, link if spec is None else "%s/%d" % (link, i))
                if value is None:  # a structure of no leaves
                    assert spec == ["none"] and leaves == []
                    continue
                if isinstance(value, list):  # a structure: leaves 0, 1, ... in flatten order
                    assert spec == ["list", [["none"], ["leaf"]]]
                    assert leaf(0) == value[1]
                    continue
                assert np.asarray(leaf(0)).tobytes() == np.asarray(value).tobytes(), key


@pytest.mark.usefixtures("all_chunked")
def test_a_golden_repacked_with_other_filters_reads_through_hdf5(tmp_path):
    # Tools like h5repack may store a golden's datasets with other filters (gzip, none) and keep
    # the attributes: tracekit's codec does not fit them, and HDF5 decodes them instead.
    import h5py

    path = str(tmp_path / "g.h5")
    base = np.arange(4096, dtype=np.float32).reshape(64, 64)
    with tracekit.create(path) as w:
        for k in range(3):
            with w.step():
                w.add("var", "w:0", base + k)  # steps 1 and 2 are XOR-deltas to the step before
                w.add("grad", "w:0", base * k)
    bits = lambda x: x.view(np.uint32)  # noqa: E731
    stored = {"steps/00000001/var/w:0": (bits(base + 1) ^ bits(base)).view(np.float32),  # what the file holds
              "steps/00000002/grad/w:0": base * 2}
    repacked = {}
    with h5py.File(path, "r+") as f:
        for name, data in stored.items():
            old = f[name]
            attrs, chunks = dict(old.attrs), old.chunks
            del f[name]
            new = f.create_dataset(name, data=data, chunks=chunks, **({"compression": "gzip"} if "var" in name else {}))
            new.attrs.update(attrs)
            repacked[name] = new.compression
    assert repacked == {"steps/00000001/var/w:0": "gzip", "steps/00000002/grad/w:0": None}
    with tracekit.open(path) as trace:
        for k in range(3):
            assert np.array_equal(trace.step(k)["var/w:0"], base + k)
            assert np.array_equal(trace.step(k)["grad/w:0"], base * k)
    assert tracekit.verify(path).ok
