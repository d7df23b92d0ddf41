"""Where tracekit leans on h5py beyond its documented API, in one place.

`phil` is h5py's global lock around HDF5 calls (the private `h5py._objects.phil`, the same
in h5py 2.10 and 3.x). h5py's own methods take it; its direct chunk I/O
(`write_direct_chunk`, `read_direct_chunk`) does not, and HDF5 is not thread-safe, so the
store takes it around those calls: the writer's threads and a reader may touch HDF5 at
the same time. tests/store/test_h5compat.py fails loudly if an h5py upgrade moves it.
"""

from __future__ import annotations

from h5py._objects import phil  # noqa: F401  # re-exported: the one import of h5py internals

__all__ = ["phil"]
