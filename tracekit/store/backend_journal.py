"""Reading an unfinished trace: a file whose writer was killed (or is still running).

The journal beside the file lists the committed values; their chunks are read
from the unfinished file at the addresses the journal gives, small values from
the journal itself. Only committed steps are visible; the trace reports itself
incomplete, with the reason, until `tracekit recover` makes it a golden.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ..errors import CorruptTrace, NewerFormat
from ..keys import INITIAL_STEP, KIND_ORDER
from . import values
from .backend import Backend, LeafRef
from .catalog import CatalogBuilder, TensorInfo
from .format import FORMAT_VERSION
from .journal import Committed, read_payload, scan


class JournalBackend(Backend):
    complete = False

    def __init__(self, path: str, journal: str) -> None:
        super(JournalBackend, self).__init__()
        self.path = path
        self.journal = journal
        self._fh = open(journal, "rb")
        self._data = open(path, "rb") if os.path.exists(path) else None
        try:
            self._load()
        except Exception:
            self.close()
            raise

    def _load(self) -> None:
        try:
            committed = Committed(scan(self.journal, self._fh))
            header = committed.open
            version = int(header["format"])
            self.producer = str(header.get("producer", "?"))
            self.created = str(header.get("created", "?"))
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptTrace("%s: unfinished trace whose journal is damaged (%s)" % (self.path, exc)) from None
        if version > FORMAT_VERSION:
            raise NewerFormat("%s is an unfinished trace in format %d (written by %s); this tracekit reads "
                              "format %d: upgrade tracekit" % (self.path, version, self.producer, FORMAT_VERSION))
        self.format_version = version
        self.meta = dict(committed.meta)
        self._steps: Dict[int, Tuple[Dict[str, Any], Dict[Tuple[str, str], Tuple[Any, int]]]] = {}
        try:
            self.catalog = self._index(committed)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            # Records pass the frame checksum, so only a foreign or hand-made journal gets here.
            raise CorruptTrace("%s: unfinished trace whose journal holds a malformed record (%s: %s)"
                               % (self.path, type(exc).__name__, exc)) from None
        self.has_initial = INITIAL_STEP in self._steps
        self.nsteps = len(self._steps) - self.has_initial
        if sorted(s for s in self._steps if s != INITIAL_STEP) != list(range(self.nsteps)):
            raise CorruptTrace("%s: unfinished trace with non-consecutive steps" % self.path)
        scanned = committed.scan
        if scanned.end == "damaged":
            self.problem = "its journal is damaged after step %d (%s)" % (self.nsteps - 1, scanned.problem)
        else:
            self.problem = "its writer did not finish it (killed, crashed, or still running)"
        if committed.dropped:
            self.problem += "; %d values of an unfinished step are left out" % committed.dropped

    def _index(self, committed: Committed) -> List[TensorInfo]:
        catalog = CatalogBuilder()
        for step in committed.order:
            info, records = committed.steps[step]
            table = {}
            for record in records:
                h = record.header
                if h["k"] not in KIND_ORDER:
                    raise ValueError("unknown kind %r" % (h["k"],))
                table[(h["k"], h["n"])] = (h, record.offset)
                catalog.add(step, h["k"], h["n"], h["st"], h["leaves"])
                if self._data is None and any(d["l"] == values.CHUNKED for d in h["leaves"]):
                    raise CorruptTrace("%s is missing: its journal %s lists data in it" % (self.path, self.journal))
            self._steps[step] = (dict(info), table)
        return catalog.entries()

    def _info(self, step: int) -> Dict[str, Any]:
        return dict(self._steps[step][0])

    def _keys(self, step: int) -> List[Tuple[str, str]]:
        return list(self._steps[step][1])

    def entry(self, step: int, kind: str, name: str) -> Tuple[Optional[list], List[LeafRef]]:
        header, offset = self._steps[step][1][(kind, name)]
        refs = []
        for desc in header["leaves"]:
            if desc["l"] == values.CHUNKED:
                loc: Any = [(tuple(off), mask, addr, size) for off, mask, size, addr in desc["cs"]]
            else:
                loc = (offset, desc["n"])
                offset += desc["n"]
            shape = tuple(desc["sh"])
            refs.append(LeafRef(desc["l"], shape, tuple(desc.get("ls", shape)), np.dtype(desc["dt"]),
                                desc.get("lg"), desc.get("f", values.ARRAY), int(desc["crc"]),
                                tuple(desc["ch"]) if "ch" in desc else None, desc.get("b"), loc))
        return header["st"], refs

    def chunks(self, ref: LeafRef) -> Iterator[Tuple[Tuple[int, ...], int, bytes]]:
        for off, mask, addr, size in ref.loc:
            yield off, mask, read_payload(self._data, addr, size)

    def plain(self, ref: LeafRef) -> np.ndarray:
        offset, size = ref.loc
        return np.frombuffer(read_payload(self._fh, offset, size), dtype=ref.dtype).reshape(ref.shape).copy()

    def close(self) -> None:
        self._fh.close()
        if self._data is not None:
            self._data.close()
