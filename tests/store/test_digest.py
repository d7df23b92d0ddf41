"""Digests: what a golden keeps of a tensor between keyframes, written, read back, verified and
recovered like any value."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import tracekit
from tracekit.store import digest as digests


@given(st.integers(0, 10 ** 12))
def test_positions_are_one_per_stratum_and_in_range(count):
    pos = digests.positions(count)
    assert pos.size == min(count, digests.SAMPLE)
    if count <= digests.SAMPLE:
        assert list(pos) == list(range(count))
        return
    strata = np.arange(digests.SAMPLE, dtype=object) * count // digests.SAMPLE
    assert (pos >= np.array(strata, dtype=np.int64)).all()
    assert (pos[:-1] < np.array(strata[1:], dtype=np.int64)).all() and pos[-1] < count


def test_positions_are_fixed_numbers():
    """The same positions in every environment: a recording's and a replay's samples pair up.
    These figures are the rule's (the legacy environment's numpy 1.18 gives them too)."""
    assert list(digests.positions(10 ** 9)[:3]) == [355700, 1888969, 2860226]
    assert list(digests.positions(12345)[-3:]) == [12311, 12329, 12339]


floats = hnp.arrays(st.sampled_from([np.float32, np.float64, np.float16]), hnp.array_shapes(min_dims=0, max_side=40),
                    elements=st.floats(-1e4, 1e4, width=16) | st.sampled_from([np.nan, np.inf, -np.inf]))


@settings(max_examples=200, deadline=None)
@given(floats)
def test_statistics_are_their_definitions(x):
    d = digests.digest(x)
    flat = x.reshape(-1).astype(np.float64)
    finite = flat[np.isfinite(flat)]
    assert (d.shape, d.count, d.dtype) == (x.shape, x.size, x.dtype.name)
    assert d.nan == int(np.isnan(flat).sum()) and d.inf == int(np.isinf(flat).sum())
    assert d.sum == pytest.approx(finite.sum(), rel=1e-12, abs=1e-9)
    assert d.sumsq == pytest.approx((finite * finite).sum(), rel=1e-12, abs=1e-9)
    assert d.sumabs == pytest.approx(np.abs(finite).sum(), rel=1e-12, abs=1e-9)
    if finite.size:
        assert (d.min, d.max, d.maxabs) == (finite.min(), finite.max(), np.abs(finite).max())
    else:
        assert np.isnan(d.min) and np.isnan(d.maxabs)
    np.testing.assert_array_equal(d.sample, x.reshape(-1)[digests.positions(x.size)])
    assert d.whole == (x.size <= digests.SAMPLE)


def test_crc_tells_bits_apart():
    x = np.linspace(-1, 1, 5000, dtype=np.float32)
    y = x.copy()
    y[4321] = np.nextafter(y[4321], np.float32(2))
    assert digests.digest(x).crc == digests.digest(x.copy()).crc != digests.digest(y).crc


@pytest.mark.parametrize("value", [np.arange(7), np.array(True), np.float32(2.5), np.zeros((0, 3), np.float32)])
def test_integers_booleans_scalars_and_empty_arrays(value):
    d = digests.digest(value)
    assert d.whole and d.count == np.asarray(value).size
    np.testing.assert_array_equal(d.value(), np.asarray(value))


def test_what_is_kept_whole():
    assert digests.digestible(np.zeros(3, np.float32)) and digests.digestible(np.int64(3))
    for value in (np.array(["a"]), np.zeros(2, np.complex64), 1.5, {"a": np.zeros(2)}, None):
        assert not digests.digestible(value)


def _write(path, steps=4, every=2, size=3000):
    rng = np.random.RandomState(0)
    written = []
    with tracekit.create(path) as w:
        with w.initial():
            w.add("var", "w", rng.randn(size).astype(np.float32))
        for i in range(steps):
            keyframe = i % every == 0
            grad, bias = rng.randn(size).astype(np.float32), rng.randn(5).astype(np.float32)
            with w.step():
                w.add("loss", "loss", np.float32(i))
                w.add("grad", "w", grad, digest=not keyframe)
                w.add("var", "b", bias, digest=not keyframe)
                w.add("fetch", "names", np.array([b"a", b"b"]), digest=not keyframe)  # strings: kept whole
            written.append((grad, bias))
    return written


def test_written_and_read_back(tmp_path):
    path = str(tmp_path / "g.h5")
    written = _write(path)
    with tracekit.open(path) as trace:
        for i, step in enumerate(trace):
            grad, bias = written[i]
            if i % 2 == 0:
                assert not step.digests
                np.testing.assert_array_equal(step["grad/w"], grad)
            else:
                assert sorted(step) == ["fetch/names", "loss/loss"]  # digests are not tensors of the step
                assert sorted(step.digests) == ["grad/w", "var/b"]
                np.testing.assert_array_equal(step.digests["grad/w"].sample, grad[digests.positions(grad.size)])
                np.testing.assert_array_equal(step.digests["var/b"].value(), bias)
                kept = step.digests["grad/w"]  # a float tensor's digest keeps no crc32
                made = digests.digest(grad)
                assert kept.crc is None and (kept.sum, kept.sumsq) == (made.sum, made.sumsq)
        info = trace.info("grad", "w")
        assert (info.steps, info.digests) == (2, 2)
    assert tracekit.verify(path).ok


@pytest.mark.modern  # h5py 3 tells where a chunk lies
def test_damaged_digests_are_found(tmp_path):
    path = str(tmp_path / "g.h5")
    _write(path, steps=2, size=20000)
    import h5py

    with h5py.File(path, "r") as f:  # a byte of the digests' compressed chunk flipped
        info = f["steps/00000001/digests/step"].id.get_chunk_info(0)
    with open(path, "r+b") as fh:
        fh.seek(info.byte_offset + info.size // 2)
        byte = fh.read(1)
        fh.seek(info.byte_offset + info.size // 2)
        fh.write(bytes([byte[0] ^ 0xFF]))
    result = tracekit.verify(path)
    assert not result.ok and any("digest" in p for p in result.problems), result.problems


def test_a_killed_recording_keeps_its_digests(tmp_path):
    path = str(tmp_path / "g.h5")
    code = ("import numpy as np, os, tracekit\n"
            "w = tracekit.create(%r)\n"
            "for i in range(3):\n"
            "    with w.step():\n"
            "        w.add('loss', 'loss', np.float32(i))\n"
            "        w.add('grad', 'w', np.arange(3000, dtype=np.float32) * i, digest=i > 0)\n"
            "w.flush()\n"
            "os._exit(0)\n" % path)
    subprocess.run([sys.executable, "-c", code], check=True)
    with tracekit.open(path) as trace:
        assert not trace.complete
        assert trace.step(2).digests["grad/w"].sum == pytest.approx(2 * 2999 * 3000 / 2)
        assert trace.info("grad/w").digests == 2
    tracekit.recover(path)
    result = tracekit.verify(path)
    assert result.ok, result.problems
    with tracekit.open(path) as trace:
        assert (trace.info("grad/w").steps, trace.info("grad/w").digests) == (1, 2)


@pytest.mark.parametrize("whole_later", [False, True])
def test_a_state_no_step_stores_whole_is_not_held_once_read(tmp_path, whole_later):
    # A digest golden's variables are whole in its initial state alone: once read (a replay loads
    # them) the reader keeps no copy, as it would of a delta chain's base.
    import gc
    import tracemalloc

    w = np.random.RandomState(0).randn(512, 512).astype(np.float32)
    path = str(tmp_path / "golden.h5")
    with tracekit.create(path) as writer:
        with writer.initial():
            writer.add("var", "w:0", w)
        for k in range(3):
            with writer.step():
                writer.add("loss", "loss", np.float32(k))
                writer.add("var", "w:0", w + k, digest=not whole_later)
    with tracekit.open(path) as trace:
        tracemalloc.start()
        try:
            value = trace.initial["var/w:0"]
            assert np.array_equal(value, w)
            del value
            gc.collect()
            held = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        # kept as the next whole snapshot's delta base, or let go
        assert (held >= w.nbytes) == whole_later, held
        if whole_later:
            assert np.array_equal(trace.step(2)["var/w:0"], w + 2)  # decoded against the bases kept
        assert np.array_equal(trace.initial["var/w:0"], w)  # read again: decoded again
