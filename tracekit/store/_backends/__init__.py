"""The two kinds of trace file a reader meets: a finished HDF5 golden (hdf5.py) and an
unfinished trace read through its journal (journal.py), behind one interface (base.py)."""

from __future__ import annotations

from .base import Backend, Header, LeafRef

__all__ = ["Backend", "Header", "LeafRef"]
