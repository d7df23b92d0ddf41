"""Chunk layout and decoding: chunks split an axis evenly (no chunk mostly padding), each is
one contiguous run of the array and decodes straight into place; goldens written with the
first layout (padded chunks) read as before, finished or unfinished."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tracekit.store import _codec
from tracekit.store._format import CHUNK_BYTES, journal_path

SHAPES = [(1536, 1536), (784, 1536), (3, 1000, 1000), (5,), (2, 3, 4), (1, 1, 7, 3000000), (4000000,),
          (2, 1, 3000, 500), (1,), (3, 1, 1), (1537, 1024)]


def padded_chunk_shape(shape, itemsize, limit=CHUNK_BYTES):
    """The first layout: as many rows as fit, the last chunk padded (1536 rows -> 682, 682, 172)."""
    chunk = list(shape)
    for axis in range(len(chunk)):
        inner = itemsize * int(np.prod(chunk[axis + 1:], dtype=np.int64))
        if inner * chunk[axis] <= limit:
            break
        chunk[axis] = max(1, limit // inner)
    return tuple(chunk)


@pytest.mark.parametrize("shape", SHAPES)
def test_chunks_are_even_contiguous_runs(shape):
    chunk = _codec.chunk_shape(shape, 4)
    assert 4 * np.prod(chunk) <= max(CHUNK_BYTES, 4 * np.prod(chunk[-1:]))
    pieces = [-(-s // c) for s, c in zip(shape, chunk)]
    assert pieces == [-(-s // c) for s, c in zip(shape, padded_chunk_shape(shape, 4))]  # as many chunks as before
    stored = np.prod(pieces) * np.prod(chunk)
    assert stored - np.prod(shape) < np.prod(chunk) / max(chunk) * max(pieces)  # under a row per chunk of padding
    covered = np.zeros(int(np.prod(shape)), np.int8)
    for offset in _codec.chunk_offsets(shape, chunk):
        start, count = _codec.chunk_span(shape, chunk, offset)
        covered[start:start + count] += 1
    assert (covered == 1).all()


def test_a_padded_kernel_is_split_evenly():
    assert padded_chunk_shape((1536, 1536), 4) == (682, 1536)
    assert _codec.chunk_shape((1536, 1536), 4) == (512, 1536)
    assert _codec.chunk_span((10, 10), (5, 5), (0, 5)) is None  # other tools' tiles are not runs


def step_values(k, rng):
    return {"var/kernel:0": rng.randn(1537, 1024).astype(np.float32) * (k + 1),
            "grad/kernel:0": rng.randn(1537, 1024).astype(np.float32),
            "slot/kernel/Adam:0": np.arange(2 * 3 * 700000, dtype=np.float64).reshape(2, 3, 700000) + k,
            "tap/h": rng.randint(0, 255, size=(9, 700001)).astype(np.uint8)}


@pytest.mark.parametrize("layout", ["padded", "even"])
@pytest.mark.parametrize("finished", [True, False])
def test_both_layouts_read_back(tmp_path, monkeypatch, layout, finished):
    if layout == "padded":
        monkeypatch.setattr(_codec, "chunk_shape", padded_chunk_shape)
    path = str(tmp_path / "t.h5")
    rng = np.random.RandomState(0)
    expected = [step_values(k, rng) for k in range(3)]  # variables and slots XOR-delta after the first
    writer = tracekit.create(path)
    for values in expected:
        with writer.step():
            for key, value in values.items():
                writer.add(*key.split("/", 1), value=value)
    if finished:
        writer.close()
    else:
        writer.flush()  # a reader finds the committed steps through the journal
    try:
        monkeypatch.undo()  # reading never asks which layout a file has
        with tracekit.open(path) as trace:
            assert trace.complete is finished
            for k, values in enumerate(expected):
                step = trace.step(k)
                for key, value in values.items():
                    got = step[key]
                    assert got.dtype == value.dtype and np.array_equal(got, value), (layout, k, key)
            dataset = trace._backend._file["steps/00000000/var/kernel:0"] if finished else None
            if dataset is not None:
                assert dataset.chunks == (padded_chunk_shape if layout == "padded" else _codec.chunk_shape)(
                    (1537, 1024), 4)
    finally:
        if not finished:
            writer.close()
    assert not (tmp_path / "t.h5.journal").exists() and journal_path(path).endswith(".journal")


def test_a_damaged_run_is_named():
    dest = np.empty(6, np.float32)
    with pytest.raises(_codec.ChunkError, match="zstd frame"):
        _codec.decode_into(dest, b"\x28\xb5\x2f\xfd" + b"\x00" * 9, 0, (6,))
    for raw in (np.arange(6, dtype=np.float32), np.zeros(6, np.float32)):  # stored raw, and compressed
        mask, payload = _codec.encode_chunk(raw, None)
        assert _codec.decode_into(dest, payload, mask, (6,)) == tracekit.store.values.checksum(raw)
        assert np.array_equal(dest, raw)
