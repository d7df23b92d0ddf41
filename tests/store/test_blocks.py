"""Golden format 2 keeps each step's info and index in blocks of steps (docs/FORMAT.md): what a
replay reads at every step lies there whole, read with its neighbours at once. Blocks end where
the format says, hold every step once, and read back bit for bit; a recording killed in the
middle of a block loses at most the step in flight, and its recovery writes the blocks anew."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracekit
from tracekit.store import FORMAT_VERSION
from tracekit.store import values
from tracekit.store._format import BLOCK_BYTES, BLOCK_STEPS

from ..support import ROOT
from ..support.layout import block_entries

# per step: (input sizes in bytes, a loss, a variable's size) -- inputs from nothing to over a MiB
SIZES = st.sampled_from([0, 4, 4096, 5000, 300 << 10, (1 << 20) + 4])
STEP = st.tuples(st.lists(SIZES, min_size=1, max_size=3), st.floats(allow_nan=False, width=32),
                 st.sampled_from([4, 4096, 20000]))


def _inputs(k, sizes):
    rng = np.random.RandomState(k)
    return {"x%d:0" % i: rng.randint(0, 255, size=size, dtype=np.uint8) for i, size in enumerate(sizes)}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=150))
def test_blocks_cover_every_step_once_and_read_back(tmp_path, steps):
    path = str(tmp_path / "g.h5")
    with tracekit.create(path) as w:
        for k, (sizes, loss, width) in enumerate(steps):
            with w.step(info={"global_step": k + 1}):
                for name, value in _inputs(k, sizes).items():
                    w.add("input", name, value)
                w.add("loss", "loss", np.float32(loss))
                w.add("var", "w:0", np.full(width // 4, k, np.float32))
    with h5py.File(path, "r") as f:
        firsts = sorted(int(name) for name in f["blocks"])
        blocks = [block_entries(f, first)[1] for first in firsts]
        chunked_inputs = {k for k in range(len(steps)) for name in f.get("steps/%08d/input" % k, {})}
    assert [entry[0] for block in blocks for entry in block] == list(range(len(steps)))  # each step once, in order
    for block in blocks:
        assert len(block) <= BLOCK_STEPS
        assert sum(len(e[1]) + len(e[2]) for e in block[:-1]) < BLOCK_BYTES  # only its last step may fill it
    for k, (sizes, loss, width) in enumerate(steps):  # an input is in its block up to a MiB, chunked beyond
        assert (k in chunked_inputs) == any(size > values.LIGHT_PLAIN_MAX_BYTES for size in sizes)
    with tracekit.open(path) as trace:
        assert trace.format_version == FORMAT_VERSION and len(trace) == len(steps)
        for k, (sizes, loss, width) in enumerate(steps):
            step = trace.step(k)
            assert step.info == {"global_step": k + 1}
            for name, value in _inputs(k, sizes).items():
                assert np.array_equal(step["input", name], value)
            assert step["loss/loss"] == np.float32(loss)
            assert np.array_equal(step["var/w:0"], np.full(width // 4, k, np.float32))
    assert tracekit.verify(path).ok


KILLED = """
import os, sys
import numpy as np
import tracekit
w = tracekit.create(sys.argv[1])
for k in range(int(sys.argv[2])):
    with w.step(info={"global_step": k}):
        w.add("input", "x:0", np.full(3000, k, np.float32))  # 12 KB: kept in its block
        w.add("loss", "loss", np.float32(k))
        w.add("grad", "w:0", np.full(3000, k, np.float32))  # 12 KB too: a dataset of its own
    print(k, flush=True)
w.flush()
os.kill(os.getpid(), 9)
"""


def test_a_recording_killed_inside_a_block_keeps_its_steps_and_recovers_them_in_blocks(tmp_path):
    path, steps = str(tmp_path / "killed.h5"), 2 * BLOCK_STEPS + 12  # two blocks written, the third open
    proc = subprocess.run([sys.executable, "-c", KILLED, path, str(steps)], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]

    def same(trace):
        assert len(trace) == steps
        for k in range(steps):
            step = trace.step(k)
            assert step.info == {"global_step": k} and step["loss/loss"] == np.float32(k)
            assert np.array_equal(step["input/x:0"], np.full(3000, k, np.float32))
            assert np.array_equal(step["grad/w:0"], np.full(3000, k, np.float32))
    with tracekit.open(path) as unfinished:  # read through its journal
        assert not unfinished.complete
        same(unfinished)
    assert tracekit.recover(path).steps == steps
    with tracekit.open(path) as recovered:
        assert recovered.complete and recovered.recovered and recovered.format_version == FORMAT_VERSION
        same(recovered)
    with h5py.File(path, "r") as f:
        assert sorted(int(name) for name in f["blocks"]) == [0, BLOCK_STEPS, 2 * BLOCK_STEPS]
    assert tracekit.verify(path).ok


@pytest.mark.parametrize("version", [1, 2])
def test_a_block_of_steps_read_once_serves_its_steps(tmp_path, version, monkeypatch):
    # A replay reads step after step: format 2 decodes each block once, not each step's attributes.
    from tools.format1 import as_format1
    from tracekit.store._backends import hdf5

    path = str(tmp_path / "g.h5")
    with tracekit.create(path) as w:
        for k in range(100):
            with w.step():
                w.add("input", "x:0", np.full(64, k, np.float32))
    if version == 1:
        as_format1(path)
    decoded, attributes = [], []
    real_decode, real_blob = hdf5.HDF5Backend._decode, hdf5.blob
    monkeypatch.setattr(hdf5.HDF5Backend, "_decode", lambda self, step, kind, *rest: (
        kind == "blocks" and decoded.append(step)) or real_decode(self, step, kind, *rest))
    monkeypatch.setattr(hdf5, "blob", lambda attrs, name: attributes.append(name) or real_blob(attrs, name))
    with tracekit.open(path) as trace:
        for k in range(100):
            step = trace.step(k)
            assert step.info == {} and step["input/x:0"][0] == k
    if version == 2:  # two blocks decoded, once each; no step attribute read
        assert decoded == [0, BLOCK_STEPS] and not attributes
    else:
        assert not decoded and attributes.count("index") == 100 and attributes.count("info") == 100
