"""The h5py internals the store relies on (tracekit/store/_h5compat.py) are still there and
behave: if an h5py upgrade breaks this test, the writer and reader need another way."""

from __future__ import annotations

import threading

import h5py
import numpy as np

from tracekit.store import _h5compat as h5compat


def test_phil_is_h5pys_own_lock():
    lock = h5compat.phil
    assert hasattr(lock, "__enter__") and hasattr(lock, "__exit__")
    with lock:  # re-entrant, as h5py takes it inside calls made while we hold it
        with lock:
            pass
    # While we hold it, another thread's h5py call waits: it is the lock h5py itself takes.
    done = threading.Event()

    def touch():
        h5py.h5t.py_create(np.dtype("f4"))
        done.set()
    with lock:
        worker = threading.Thread(target=touch)
        worker.start()
        assert not done.wait(0.2), "h5py no longer takes the lock tracekit takes around direct chunk I/O"
    worker.join(5)
    assert done.is_set()


def test_direct_chunk_io_round_trips_through_a_file_object(tmp_path):
    """The two calls tracekit makes under that lock, on a file h5py writes through a Python
    file object (the "fileobj" driver the golden writer uses)."""
    path = str(tmp_path / "x.h5")
    with open(path, "w+b") as fh:
        with h5py.File(fh, "w", libver=("v110", "v110")) as f:
            dset = f.create_dataset("d", shape=(4,), dtype="<u1", chunks=(4,))
            with h5compat.phil:
                dset.id.write_direct_chunk((0,), b"\x01\x02\x03\x04", 0)
    with h5py.File(path, "r") as f:
        with h5compat.phil:
            mask, payload = f["d"].id.read_direct_chunk((0,))
        assert f["d"][()].tolist() == [1, 2, 3, 4]
    assert (mask, bytes(payload)) == (0, b"\x01\x02\x03\x04")
