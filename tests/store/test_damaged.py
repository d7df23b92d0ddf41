"""Damaged, truncated, foreign and newer files fail with one clear TracekitError, never a
raw traceback, a hang, or silently wrong data."""

from __future__ import annotations

import collections
import importlib
import os
import re
import shutil
import subprocess
import sys
import tracemalloc
import zlib

import h5py
import numpy as np
import pytest

import tracekit
from tracekit.cli import main
from tracekit.store import FORMAT_VERSION, _journal as journal, _metadata as metadata, structures
from tracekit.store._format import step_path, value_path

from ..support import ROOT
from ..support import payloads
from ..support import write_steps
from ..support.layout import as_format1, get_blob, set_blob, to_format1

CASES = int(os.environ.get("TRACEKIT_DAMAGE_CASES", "150"))


def _damage_run(path, seed):
    proc = subprocess.run([sys.executable, "-m", "tests.store.damage_child", path, str(seed), str(CASES)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT), universal_newlines=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == CASES
    bad = [l for l in lines if l.split()[1] in ("silent", "crash")]
    assert not bad, "\n".join(bad)
    outcomes = [l.split()[1] for l in lines]
    return outcomes


def test_random_damage_to_golden(tmp_path):
    path = write_steps(str(tmp_path / "g.h5"), 4)
    outcomes = _damage_run(path, 1)
    assert outcomes.count("unreadable") + outcomes.count("reported") > CASES // 3  # damage is seen


def test_random_damage_to_unfinished_trace(tmp_path):
    path = str(tmp_path / "j.h5")
    w = tracekit.create(path)
    with w.initial():
        for key, value in payloads.initial_values().items():
            w.add(*key.split("/", 1), value=value)
    for k in range(4):
        with w.step():
            for key, value in payloads.step_values(k).items():
                w.add(*key.split("/", 1), value=value)
    w.flush()
    copy = str(tmp_path / "unfinished.h5")
    for suffix in (".partial", ".journal"):  # an interrupted recording: its data and its journal
        with open(path + suffix, "rb") as src, open(copy + suffix, "wb") as dst:
            dst.write(src.read())
    w.close()
    with tracekit.open(copy) as trace:
        assert not trace.complete and len(trace) == 4
    outcomes = _damage_run(copy, 2)
    assert outcomes.count("unreadable") + outcomes.count("reported") > CASES // 3


@pytest.mark.parametrize("content, message", [
    (b"", "the file is empty"),
    (b"hello, world\n", "neither HDF5 nor a tracekit journal"),
    (b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, "neither HDF5 nor a tracekit journal"),
    (b"\x89HDF\r\n\x1a\n" + b"\x00" * 100, "cannot be opened as HDF5"),
    (b"TRACEKIT golden\nformat 1\ntoken abc\n", "unfinished tracekit golden whose journal .* is missing"),
])
def test_foreign_files(tmp_path, content, message):
    path = tmp_path / "foreign.h5"
    path.write_bytes(content)
    with pytest.raises(tracekit.TraceFormatError, match=message) as err:
        tracekit.open(str(path))
    assert str(path) in str(err.value)


@pytest.mark.parametrize("journal", [b"\x89TKJ\r\n\x1a\n", b"\x89TKJ\r\n\x1a\n" + b"\xff" * 64, b"garbage"])
def test_damaged_journal(tmp_path, journal):
    (tmp_path / "t.h5").write_bytes(b"")
    (tmp_path / "t.h5.journal").write_bytes(journal)
    with pytest.raises(tracekit.CorruptTrace, match="journal is damaged") as err:
        tracekit.open(str(tmp_path / "t.h5"))
    assert str(tmp_path / "t.h5") in str(err.value)


def _unfinished_copy(tmp_path, steps=2):
    """An unfinished trace (golden + journal) of `steps` committed steps, as a killed writer leaves it."""
    path, copy = str(tmp_path / "live.h5"), str(tmp_path / "unfinished.h5")
    w = tracekit.create(path)
    for k in range(steps):
        with w.step():
            for key, value in payloads.step_values(k).items():
                w.add(*key.split("/", 1), value=value)
    w.flush()
    for suffix in (".partial", ".journal"):  # an interrupted recording: its data and its journal
        with open(path + suffix, "rb") as src, open(copy + suffix, "wb") as dst:
            dst.write(src.read())
    w.close()
    return copy


@pytest.mark.parametrize("value, message", [
    ({"k": "weights", "n": "a", "st": None, "leaves": []}, "unknown kind 'weights'"),
    ({"k": "var", "n": "a", "st": None}, "malformed record \\(ValueError: value record without a list of leaves"),
    # a bare value has one leaf; a structure as many as it says (None: none)
    ({"k": "var", "n": "a", "st": None, "leaves": []}, "value record of 0 leaves whose structure holds 1"),
    ({"k": "var", "n": "a", "st": ["list", [["leaf"]]], "leaves": []}, "of 0 leaves whose structure holds 1"),
    ({"k": "var", "n": "a", "st": None, "leaves": [{"l": "plain"}]}, "malformed record"),
])
def test_hand_made_journal_records(tmp_path, value, message):
    # Well-framed records (valid checksums) with wrong contents: one clear error, not a KeyError.
    path = _unfinished_copy(tmp_path)
    with open(path + ".journal", "ab") as f:
        for header in (dict(value, t="value", q=999, s=2), {"t": "step", "q": 999, "s": 2, "info": {}, "n": 1}):
            head = metadata.pack(header)
            f.write(journal._FRAME.pack(len(head), journal._crc(head, 0), 0) + head)
    with pytest.raises(tracekit.CorruptTrace, match=message) as err:
        with tracekit.open(path) as trace:
            trace.step(2)["var/a"]
    assert path in str(err.value)


def test_missing_and_directory(tmp_path):
    with pytest.raises(tracekit.GoldenNotFound, match="no trace at") as err:
        tracekit.open(str(tmp_path / "nope.h5"))
    assert isinstance(err.value, FileNotFoundError)
    with pytest.raises(tracekit.GoldenNotFound, match="no trace at"):
        tracekit.open(str(tmp_path / "nope.h5.journal"))
    with pytest.raises(tracekit.NotATrace, match="is a directory"):
        tracekit.open(str(tmp_path))


def test_plain_hdf5_is_not_a_trace(tmp_path):
    path = str(tmp_path / "plain.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(3)
    with pytest.raises(tracekit.NotATrace, match="HDF5 file but not a tracekit golden"):
        tracekit.open(path)


def _edit(path, fn):
    with h5py.File(path, "r+") as f:
        fn(f)


@pytest.mark.parametrize("edit, error, message", [
    (lambda f: f.attrs.__setitem__("tracekit_format", FORMAT_VERSION + 1), tracekit.NewerFormat,
     "format %d .* upgrade tracekit" % (FORMAT_VERSION + 1)),
    (lambda f: f.attrs.__delitem__("tracekit_format"), tracekit.NotATrace, "not a tracekit golden"),
    (lambda f: f.attrs.__setitem__("tracekit_format", "abc"), tracekit.CorruptTrace, "bad root attributes"),
    (lambda f: f.attrs.__setitem__("tracekit_format", 0), tracekit.CorruptTrace, "bad format version"),
    (lambda f: f.attrs.__setitem__("steps", 9), tracekit.CorruptTrace, "says 9 steps but holds 3"),
    (lambda f: f.__delitem__("meta"), tracekit.CorruptTrace, "metadata unreadable"),
    (lambda f: (f.__delitem__("meta"), f.create_dataset("meta", data=np.frombuffer(b"\xc1garbage", "u1"))),
     tracekit.CorruptTrace, "metadata unreadable"),
    (lambda f: (f.__delitem__("meta"), f.create_dataset("meta", data=np.frombuffer(b"\xd4\x01\x00", "u1"))),
     tracekit.CorruptTrace, "extension type"),
])
def test_bad_root(tmp_path, edit, error, message, capsys):
    path = write_steps(str(tmp_path / "g.h5"), 3)
    _edit(path, edit)
    with pytest.raises(error, match=message) as err:
        tracekit.open(path)
    assert path in str(err.value)
    # The commands agree: exit 1 for a damaged golden, 2 for one that is not ours to read.
    code = 1 if issubclass(error, tracekit.CorruptTrace) else 2
    assert main(["show", path]) == code and main(["verify", path]) == code
    assert ("damaged" if code == 1 else "error") in capsys.readouterr().err


def _edit_leaf(f, step, key, where, attr, value, wire=None):
    """Edit what describes a leaf: the attribute `attr` of its dataset in a golden without the
    step index (an older golden: reads take the attributes), or the index's field `wire` (in its
    block of steps, or with `index1` in format 1's step attributes, beside the leaf's dataset)."""
    kind, name = key.split("/", 1)
    if where in ("dataset", "index1"):  # format 1's layout, read by its datasets or by its index
        to_format1(f)
    if where == "dataset":
        del f[step_path(step)].attrs["index"]
        f[value_path(step, kind, name)].attrs[attr] = value
        return
    entries = get_blob(f, step, "index")
    for entry in entries:
        if entry[:2] == [kind, name]:
            entry[3][0][wire] = value.decode() if isinstance(value, bytes) else value
    set_blob(f, step, "index", entries)


@pytest.mark.parametrize("where", ["dataset", "index"])
def test_checksum_mismatch_names_step_and_tensor(tmp_path, where):
    path = write_steps(str(tmp_path / "g.h5"), 3)
    _edit(path, lambda f: _edit_leaf(f, 1, "grad/dense/kernel:0", where, "crc32", np.uint32(1), "crc"))
    result = tracekit.verify(path)
    assert not result.ok and result.complete
    assert any("step 1, grad/dense/kernel:0: checksum mismatch" in problem for problem in result.problems)
    with tracekit.open(path) as trace:
        with pytest.raises(tracekit.CorruptTrace, match="step 1, grad/dense/kernel:0: checksum mismatch"):
            trace.step(1)["grad/dense/kernel:0"]
        assert trace.step(2)["grad/dense/kernel:0"].shape == (3, 60)


def _chunk_payload(path, step, key):
    """(file offset, bytes) of a chunked leaf's first chunk payload."""
    kind, name = key.split("/", 1)
    with h5py.File(path, "r") as f:
        dataset = f[value_path(step, kind, name)]
        mask, payload = dataset.id.read_direct_chunk((0,) * dataset.ndim)
    with open(path, "rb") as fh:
        return fh.read().find(payload), payload


@pytest.mark.parametrize("where", ["dataset", "index"])
def test_frames_vouch_for_their_bytes_and_verify_still_checks_the_crc(tmp_path, where):
    # A chunk that is a zstd frame with its content checksum is checked by zstd as it decodes, so a
    # read computes no crc32 for it: a wrong crc32 attribute alone (the bytes intact) reads the right
    # value. tracekit verify computes every crc32 and reports it.
    path = str(tmp_path / "g.h5")
    value = np.linspace(0, 1, 4096, dtype=np.float32).reshape(64, 64)
    with tracekit.create(path) as w:
        for k in range(2):
            with w.step():
                w.add("grad", "w:0", value * (k + 1))
    offset, payload = _chunk_payload(path, 1, "grad/w:0")
    assert payload[:4] == b"\x28\xb5\x2f\xfd" and payload[4] & 0x04  # a frame with its checksum
    _edit(path, lambda f: _edit_leaf(f, 1, "grad/w:0", where, "crc32", np.uint32(1), "crc"))
    with tracekit.open(path) as trace:
        assert np.array_equal(trace.step(1)["grad/w:0"], value * 2)
    result = tracekit.verify(path)
    assert [p for p in result.problems if "step 1, grad/w:0: checksum mismatch" in p]
    with open(path, "r+b") as fh:  # a flipped bit inside the frame: zstd's checksum sees it
        fh.seek(offset + len(payload) // 2)
        byte = fh.read(1)
        fh.seek(offset + len(payload) // 2)
        fh.write(bytes([byte[0] ^ 0x10]))
    with tracekit.open(path) as trace:
        with pytest.raises(tracekit.CorruptTrace, match="step 1, grad/w:0: cannot be read"):
            trace.step(1)["grad/w:0"]


def test_a_chunk_stored_raw_is_checked_by_crc32(tmp_path):
    # Random bytes do not compress: the chunk is kept shuffled only, with no frame to check it, and
    # a read computes the leaf's crc32.
    path = str(tmp_path / "g.h5")
    noise = np.random.RandomState(0).randint(0, 2 ** 32, size=(64, 64), dtype=np.uint64).astype(np.uint32)
    with tracekit.create(path) as w:
        with w.step():
            w.add("fetch", "noise", noise.view(np.float32))
    offset, payload = _chunk_payload(path, 0, "fetch/noise")
    assert payload[:4] != b"\x28\xb5\x2f\xfd" and len(payload) == noise.nbytes
    with open(path, "r+b") as fh:
        fh.seek(offset + 100)
        byte = fh.read(1)
        fh.seek(offset + 100)
        fh.write(bytes([byte[0] ^ 0x01]))
    with tracekit.open(path) as trace:
        with pytest.raises(tracekit.CorruptTrace, match="step 0, fetch/noise: checksum mismatch"):
            trace.step(0)["fetch/noise"]


@pytest.mark.parametrize("where", ["dataset", "index"])
@pytest.mark.usefixtures("all_chunked")
def test_bad_delta_base(tmp_path, where):
    path = write_steps(str(tmp_path / "g.h5"), 3)
    _edit(path, lambda f: _edit_leaf(f, 1, "var/dense/kernel:0", where, "delta_base",
                                     "/steps/00000002/var/dense%2Fkernel:0", "b") if where == "dataset" else
          _edit_leaf(f, 1, "var/dense/kernel:0", where, None, 2, "b"))
    with tracekit.open(path) as trace:
        with pytest.raises(tracekit.CorruptTrace, match="step 1, var/dense/kernel:0: .*delta base step 2"):
            trace.step(1)["var/dense/kernel:0"]


@pytest.mark.usefixtures("all_chunked")
def test_dataset_attributes_that_disagree_with_the_index_fail_verify(tmp_path):
    # Reads take a chunked leaf's descriptor from the step index; verify holds the dataset's
    # attributes to it, so damage to either is found.
    path = write_steps(str(tmp_path / "g.h5"), 3)
    with tracekit.open(path) as trace:
        expected = trace.step(1)["grad/dense/kernel:0"]
    _edit(path, lambda f: f[value_path(1, "grad", "dense/kernel:0")].attrs.__setitem__("crc32", np.uint32(1)))
    result = tracekit.verify(path)
    assert result.problems == ["%s: step 1, grad/dense/kernel:0: the step index and the dataset disagree; the file "
                               "is damaged" % path]
    with tracekit.open(path) as trace:
        np.testing.assert_array_equal(trace.step(1)["grad/dense/kernel:0"], expected)


def _leaf_trace(path):
    with tracekit.create(path) as w:
        with w.step():
            w.add("fetch", "names", np.array([b"ab", b"cde"], dtype=object))
            w.add("tap", "counts", np.arange(4, dtype=np.uint16))
            w.add("tap", "times", np.arange(4).astype("M8[s]"))
    return path


WIRE = {"logical_shape": "ls", "logical_dtype": "lg", "form": "f"}


@pytest.mark.parametrize("where", ["dataset", "index", "index1"])
@pytest.mark.parametrize("key, attr, value, message", [
    ("fetch/names", "logical_shape", np.array([99], dtype=np.int64), "string blob shorter"),
    ("fetch/names", "logical_dtype", np.bytes_(b"<U9x"), "cannot be read"),
    ("tap/counts", "logical_dtype", np.bytes_(b"<f8"), "logical dtype <f8 does not fit storage dtype uint16"),
    ("tap/counts", "form", np.bytes_(b"scalar"), "a scalar leaf has shape"),
    ("tap/counts", "form", np.bytes_(b"tensor"), "unknown leaf form"),
    ("tap/times", "logical_dtype", np.bytes_(b"weird"), "unknown dtype 'weird'"),
    ("tap/times", "logical_dtype", np.bytes_(b"<M8[ms]"), None),  # fits: a wrong unit the checksum cannot see
])
def test_edited_leaf_attributes(tmp_path, key, attr, value, message, where):
    # The checksum covers a tensor's bytes; what the descriptor says about them is checked too,
    # in the step index (which reads use) and in a dataset's attributes (format 1's goldens).
    path = _leaf_trace(str(tmp_path / "g.h5"))
    wire = [int(d) for d in value] if attr == "logical_shape" else value
    _edit(path, lambda f: _edit_leaf(f, 0, key, where, attr, value if where == "dataset" else wire, WIRE[attr]))
    result = tracekit.verify(path)
    with tracekit.open(path) as trace:
        if message is None:
            assert trace.step(0)[key].dtype == np.dtype("<M8[ms]")
            # verify sees it only where a second description says otherwise: format 1's dataset
            # beside its index (format 2 keeps a plain leaf in its block of steps alone)
            assert result.ok == (where != "index1") and len(result.problems) == (where == "index1")
            return
        assert not result.ok and any(message in problem for problem in result.problems)
        with pytest.raises(tracekit.CorruptTrace, match="step 0, %s: .*%s" % (key, re.escape(message))) as err:
            trace.step(0)[key]
        assert path in str(err.value)


def test_damaged_step_info_is_reported(tmp_path):
    path = as_format1(_leaf_trace(str(tmp_path / "g.h5")))
    _edit(path, lambda f: f[step_path(0)].attrs.__setitem__("info", np.void(b"\xc1")))
    result = tracekit.verify(path)
    assert not result.ok and "step 0, step info: cannot be read" in result.problems[0]


def test_catalog_disagreement_is_reported(tmp_path):
    path = write_steps(str(tmp_path / "g.h5"), 3)

    def drop(f):
        meta = metadata.unpack(f["meta"][()].tobytes())
        meta["catalog"] = [c for c in meta["catalog"] if c["kind"] != "lr"]
        del f["meta"]
        f["meta"] = np.frombuffer(metadata.pack(meta), "u1")
    _edit(path, drop)
    result = tracekit.verify(path)
    assert not result.ok and "lr/learning_rate is not in the catalog" in result.problems[0]


def test_metadata_refuses_code():
    with pytest.raises(ValueError, match="extension type"):
        metadata.unpack(b"\xd4\x01\x00")
    assert metadata.unpack(metadata.pack({"a": [1, b"x", None]})) == {"a": [1, b"x", None]}


def test_a_flipped_bit_in_the_metadata_is_caught(tmp_path, capsys):
    # /meta is raw dataset bytes, which HDF5 does not checksum: seeds or user metadata could
    # change silently. The crc32 beside them refuses the file instead.
    path = write_steps(str(tmp_path / "g.h5"), 2)
    with h5py.File(path, "r") as f:
        offset, size = f["meta"].id.get_offset(), f["meta"].id.get_storage_size()
    for bit in (0, 8 * size // 2 + 3, 8 * size - 1):  # first, middle and last byte
        copy = str(tmp_path / ("flip%d.h5" % bit))
        shutil.copyfile(path, copy)
        with open(copy, "r+b") as f:
            f.seek(offset + bit // 8)
            byte = f.read(1)[0]
            f.seek(offset + bit // 8)
            f.write(bytes([byte ^ (1 << bit % 8)]))
        with pytest.raises(tracekit.CorruptTrace, match="metadata unreadable \\(its checksum does not match\\)"):
            tracekit.open(copy)
        assert main(["verify", copy]) == 1
        assert capsys.readouterr().out.startswith("DAMAGED  %s: metadata unreadable" % copy)


def test_verify_says_when_a_golden_predates_the_metadata_checksums(tmp_path, capsys):
    path = write_steps(str(tmp_path / "g.h5"), 2)
    assert tracekit.verify(path).notes == []
    _edit(path, lambda f: f["meta"].attrs.__delitem__("crc32"))  # as goldens written before it
    result = tracekit.verify(path)
    assert result.ok and len(result.notes) == 1 and "damage to those cannot be detected" in result.notes[0]
    assert main(["verify", path]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("  note: written before tracekit kept checksums")


@pytest.mark.parametrize("name", ["info", "index"])
@pytest.mark.parametrize("version", [1, 2])
def test_a_step_blob_that_disagrees_with_its_checksum_is_caught(tmp_path, name, version):
    # Format 1: a blob over 64 KiB lives in HDF5's dense attribute storage, which HDF5 does not
    # checksum. Format 2: a block of steps is raw dataset bytes, which HDF5 does not checksum either.
    path = write_steps(str(tmp_path / "g.h5"), 2)
    if version == 1:
        as_format1(path)

    def edit(f):
        value = get_blob(f, 1, name)
        value = dict(value, global_step=99) if name == "info" else value[1:]
        if version == 1:
            set_blob(f, 1, name, value, checksum=False)  # the blob changed, its checksum did not
            return
        set_blob(f, 1, name, value)
        f["blocks/00000000"].attrs["crc32"] ^= np.uint32(1)
    _edit(path, edit)
    message = ("'%s' attribute does not match its checksum" % name if version == 1 else
               "the block of steps at step 0 does not match its checksum")
    with tracekit.open(path) as trace:
        with pytest.raises(tracekit.CorruptTrace, match="step 1, .*%s" % message):
            trace.step(1).info if name == "info" else list(trace.step(1))
        if version == 1:
            assert trace.step(0).info == {"global_step": 1}  # the other steps read
    assert not tracekit.verify(path).ok


def test_an_attribute_hdf5_cannot_read_is_damage_not_absence(tmp_path, monkeypatch):
    # A step whose index is over 64 KiB keeps its attributes in HDF5's dense storage. A flipped
    # bit there fails HDF5's checksum, and h5py raises KeyError, as for an attribute that is
    # not there: read as absent, the step's info was silently {}.
    path = str(tmp_path / "g.h5")
    with tracekit.create(path, meta={}) as w:
        for step in range(2):
            with w.step({"global_step": step + 1}):
                for i in range(1000):
                    w.add("var", "layer%04d/kernel:0" % i, np.full(3, i, np.float32))
    as_format1(path)  # format 2 keeps a step's info in its block of steps, checked by its checksum
    with h5py.File(path, "r") as f:
        assert len(f[step_path(1)].attrs["index"].tobytes()) > 64 << 10
        raw = f[step_path(1)].attrs["info"].tobytes()
    data = bytearray(open(path, "rb").read())
    data[data.index(raw) + len(raw) // 2] ^= 0x10
    with open(path, "wb") as fh:
        fh.write(bytes(data))
    # HDF5 itself reports the damage: the golden is kept out of this process (store/_screen.py) ...
    with pytest.raises(tracekit.CorruptTrace, match="HDF5 reports damage in the file's structure .*attribute 'info' "
                                                    "unreadable"):
        tracekit.open(path)
    result = tracekit.verify(path)  # ... and verify, reading in a child, says where
    assert not result.ok and any("step 1, step info: " in p and "'info' unreadable" in p for p in result.problems)
    monkeypatch.setenv("TRACEKIT_SCREEN", "0")  # read here anyway: the step's info is damage, not absent
    with tracekit.open(path) as trace:
        with pytest.raises(tracekit.CorruptTrace, match="step 1, step info: .*attribute 'info' unreadable"):
            trace.step(1).info
        assert trace.step(0).info == {"global_step": 1}


@pytest.mark.parametrize("dtype", [h5py.string_dtype(), h5py.vlen_dtype(np.int32), h5py.ref_dtype],
                         ids=["vlen-str", "vlen-int", "reference"])
def test_hdf5_types_tracekit_never_writes_are_reported(tmp_path, dtype, capsys):
    path = write_steps(str(tmp_path / "g.h5"), 2)

    def edit(f):
        to_format1(f)
        group = f[step_path(1) + "/grad"]
        name = sorted(group)[0]
        attrs = dict(group[name].attrs)
        del group[name]
        dset = group.create_dataset(name, shape=(2,), dtype=dtype)
        for key, value in attrs.items():
            dset.attrs[key] = value
    _edit(path, edit)
    result = tracekit.verify(path)
    assert not result.ok and any("HDF5 type tracekit does not write" in p for p in result.problems)
    assert main(["verify", path]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("DAMAGED  %s" % path) and "Traceback" not in out + err


def _replace_dataset(f, step, key, **create):
    """Put a hostile dataset in place of a leaf, its attributes kept, in a golden read through
    the datasets (the step index removed, as in goldens written before it)."""
    kind, name = key.split("/", 1)
    to_format1(f)
    del f[step_path(step)].attrs["index"]
    path = value_path(step, kind, name)
    attrs = dict(f[path].attrs)
    del f[path]
    dset = f.create_dataset(path, **create)
    for attr, value in attrs.items():
        dset.attrs[attr] = value


def _refused_cheaply(path, step, key, message):
    """Reading `key` of `step` raises CorruptTrace matching `message`, having allocated next to nothing."""
    tracemalloc.start()
    try:
        with tracekit.open(path) as trace:
            with pytest.raises(tracekit.CorruptTrace, match=message):
                trace.step(step)[key]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


@pytest.mark.parametrize("key, create, message", [
    # 1 GiB declared, one chunk of 256 stored: refused before anything is allocated
    ("tap/dense/Relu:0", dict(shape=(1 << 28,), chunks=(1 << 20,), dtype="f4"), "0 of 256 chunks present"),
    # 3.6 TiB declared
    ("tap/dense/Relu:0", dict(shape=(10 ** 12,), chunks=(1 << 20,), dtype="f4"), "more than half this machine"),
    # a plain dataset whose shape says 400 MB and which holds nothing
    ("input/x:0", dict(shape=(10 ** 8,), dtype="f4"), "the dataset holds 0 bytes, its shape and type 400000000"),
])
def test_declared_sizes_are_checked_before_allocating(tmp_path, key, create, message):
    path = write_steps(str(tmp_path / "g.h5"), 2)
    _edit(path, lambda f: _replace_dataset(f, 1, key, **create))
    _refused_cheaply(path, 1, key, re.escape(message))


def test_a_string_dtype_far_wider_than_its_text_is_refused(tmp_path):
    path = _leaf_trace(str(tmp_path / "g.h5"))
    with h5py.File(path, "r+") as f:
        _edit_leaf(f, 0, "fetch/names", "index", "logical_dtype", b"<U100000000", "lg")
    _refused_cheaply(path, 0, "fetch/names", "far wider than the text")


def test_a_namedtuple_of_too_many_fields_is_refused(tmp_path):
    path = write_steps(str(tmp_path / "g.h5"), 2)

    def edit(f):
        entries = get_blob(f, 1, "index")
        for entry in entries:
            if entry[:2] == ["fetch", "train"]:  # [None, leaf] -> a namedtuple of 200,000 fields
                fields = ["f%d" % i for i in range(200000)]
                entry[2] = ["namedtuple", "Big", fields, [["none"]] * (len(fields) - 1) + [["leaf"]]]
        set_blob(f, 1, "index", entries)
    _edit(path, edit)
    with tracekit.open(path) as trace:
        with pytest.raises(tracekit.CorruptTrace, match="a namedtuple of 200000 fields"):
            trace.step(1)["fetch/train"]
    with pytest.raises(tracekit.UnsupportedValue, match="namedtuple of 5000 fields"):
        structures.flatten(collections.namedtuple("Wide", ["f%d" % i for i in range(5000)])(*range(5000)), "x")


def test_a_journal_payload_beyond_the_file_is_refused(tmp_path):
    path = _unfinished_copy(tmp_path)
    with open(path + ".journal", "ab") as f:
        header = {"t": "value", "q": 999, "s": 2, "k": "var", "n": "a", "st": None,
                  "leaves": [{"l": "plain", "sh": [1 << 38], "dt": "<f4", "f": "array", "crc": 0, "n": 1 << 40}]}
        head = metadata.pack(header)
        f.write(journal._FRAME.pack(len(head), journal._crc(head, 0), 0) + head)
        head = metadata.pack({"t": "step", "q": 999, "s": 2, "info": {}, "n": 1})
        f.write(journal._FRAME.pack(len(head), journal._crc(head, 0), 0) + head)
    _refused_cheaply(path, 2, "var/a", "lies beyond the end of")


@pytest.mark.parametrize("edit, message", [
    (lambda f: (f.__delitem__("meta"), f.create_dataset("meta", shape=(1 << 30,), dtype="u1")),
     "metadata declared 1073741824 bytes"),
    (lambda f: (f.__delitem__("meta"), f.create_dataset("meta", data=np.zeros(4, "f4"))), "not 1-d uint8"),
    (lambda f: (f.__delitem__("meta"), f.create_dataset("meta", data=np.frombuffer(metadata.pack(
        {"catalog": [{"kind": "var", "name": "v%d" % i} for i in range(20000)]}), "u1"))),
     "a catalog of 20000 entries"),
])
def test_metadata_that_declares_too_much(tmp_path, edit, message):
    path = write_steps(str(tmp_path / "g.h5"), 2)
    _edit(path, edit)
    with pytest.raises(tracekit.CorruptTrace, match="metadata unreadable \\(.*%s" % re.escape(message)):
        tracekit.open(path)


def test_verify_reports_what_no_reader_foresaw_as_damage(tmp_path, capsys):
    # A crc32 attribute that is an array, a kind group that is a dataset: h5py and numpy raise
    # TypeError or AttributeError deep inside; verify reports them, it does not crash.
    path = write_steps(str(tmp_path / "g.h5"), 3)

    def edit(f):
        to_format1(f)
        f[value_path(1, "grad", "dense/kernel:0")].attrs["crc32"] = np.array([1, 2], dtype="u4")
        del f[step_path(2) + "/lr"]
        f[step_path(2) + "/lr"] = np.zeros(3)
    _edit(path, edit)
    result = tracekit.verify(path)
    assert not result.ok
    assert any("step 1 cannot be checked (TypeError" in p for p in result.problems), result.problems
    assert main(["verify", path]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("DAMAGED  %s" % path) and "Traceback" not in out + err


def test_a_recovery_killed_before_removing_the_journal_is_finished_by_the_next(tmp_path, monkeypatch):
    # Killed after it put the golden in place and removed the data file, before the journal:
    # the next recovery finds the golden whole and removes the journal (it tried to rebuild from
    # the journal alone, and failed removing the data file that was gone).
    recovering = importlib.import_module("tracekit.store.recover")  # the module, not the function

    path = _unfinished_copy(tmp_path, steps=3)
    real_remove = os.remove

    def killed_at_the_journal(name):
        if name.endswith(".journal"):
            raise KeyboardInterrupt("killed")
        real_remove(name)
    monkeypatch.setattr(recovering.os, "remove", killed_at_the_journal)
    with pytest.raises(KeyboardInterrupt):
        tracekit.recover(path)
    monkeypatch.setattr(recovering.os, "remove", real_remove)
    assert os.path.exists(path + ".journal") and not os.path.exists(path + ".partial")
    result = tracekit.recover(path)
    assert result.action == "stale-journal" and not os.path.exists(path + ".journal")
    with tracekit.open(path) as trace:
        assert trace.complete and len(trace) == 3
