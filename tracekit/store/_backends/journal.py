"""Reading an unfinished trace: a file whose writer was killed (or is still running).

The journal beside the file lists the committed values; their chunks are read
from the unfinished file at the addresses the journal gives, small values from
the journal itself. Only committed steps are visible; the trace reports itself
incomplete, with the reason, until `tracekit recover` makes it a golden.
"""

from __future__ import annotations

from typing import IO, Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ...errors import CorruptTrace, NewerFormat
from ...keys import INITIAL_STEP
from .. import _metadata, digest, values
from .._format import DIGESTS_KIND, DIGESTS_NAME, FORMAT_VERSION
from .._journal import Committed, MalformedRecord, read_payload, scan
from .._lock import held
from .._wire import ValueRecord
from ..catalog import CatalogBuilder
from .base import Backend, LeafRef, short


class JournalBackend(Backend):
    def __init__(self, path: str, journal: str, data: Optional[str] = None) -> None:
        """`data`: the file holding the chunks (by default `path`; a recording writes them
        beside it, in path + PARTIAL_SUFFIX, its opening record says)."""
        super().__init__(path)
        self.header.complete = False
        self.journal = journal
        self.data = path if data is None else data
        self._fh = open(journal, "rb")
        try:
            self._data: Optional[IO[bytes]] = open(self.data, "rb")
        except FileNotFoundError:  # no chunk written yet, or the file was just renamed into the golden
            self._data = None
        self._steps: Dict[int, Tuple[Dict[str, Any], Dict[Tuple[str, str], Tuple[ValueRecord, int]]]] = {}
        try:
            self._load()
        except Exception:
            self.close()
            raise

    def _load(self) -> None:
        header = self.header
        try:
            committed = Committed.of(scan(self.journal, self._fh))
        except MalformedRecord as exc:
            # Records pass the frame checksum, so only a foreign or hand-made journal gets here.
            raise CorruptTrace("%s: unfinished trace whose journal holds a malformed record (%s)"
                               % (self.path, exc)) from None
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptTrace("%s: unfinished trace whose journal is damaged (%s)"
                               % (self.path, short(exc, typed=False))) from None
        opening = committed.open
        header.producer, header.created = opening.producer, opening.created
        if opening.format > FORMAT_VERSION:
            raise NewerFormat("%s is an unfinished trace in format %d (written by %s); this tracekit reads "
                              "format %d: upgrade tracekit" % (self.path, opening.format, opening.producer,
                                                               FORMAT_VERSION))
        header.format_version = opening.format
        header.meta = dict(committed.meta)
        catalog = CatalogBuilder()
        for step in committed.order:
            info, records = committed.steps[step]
            table = {}
            for record, offset in records:
                table[(record.kind, record.name)] = (record, offset)
                catalog.add(step, record)
                if self._data is None and any(d.layout == values.CHUNKED for d in record.leaves):
                    raise CorruptTrace("%s is missing: its journal %s lists data in it" % (self.data, self.journal))
            self._steps[step] = (dict(info), table)
        for step in committed.order:  # the digests a step keeps: decoded now, for the catalog
            if (DIGESTS_KIND, DIGESTS_NAME) in self._steps[step][1]:
                try:
                    entries = _metadata.unpack(np.asarray(self.value(step, DIGESTS_KIND, DIGESTS_NAME)).tobytes())
                except Exception:  # noqa: BLE001  # damage: reading the step's digests says what
                    continue
                for described in digest.described(entries):
                    catalog.add_digest(*described)
        header.catalog = catalog.entries()
        header.has_initial = INITIAL_STEP in self._steps
        header.nsteps = len(self._steps) - header.has_initial
        if sorted(s for s in self._steps if s != INITIAL_STEP) != list(range(header.nsteps)):
            raise CorruptTrace("%s: unfinished trace with non-consecutive steps" % self.path)
        scanned = committed.scan
        if scanned.end == "damaged":
            header.problem = "its journal is damaged after step %d (%s)" % (header.nsteps - 1, scanned.problem)
        else:
            header.writing = held(self.journal)
            header.problem = ("it is still being recorded (its writer is running)" if header.writing else
                              "its writer did not finish it (killed or crashed)")
        if committed.dropped:
            header.problem += "; %d values of an unfinished step are left out" % committed.dropped

    def _info(self, step: int) -> Dict[str, Any]:
        return dict(self._steps[step][0])

    def _keys(self, step: int) -> List[Tuple[str, str]]:
        return list(self._steps[step][1])

    def entry(self, step: int, kind: str, name: str) -> Tuple[Optional[list], List[LeafRef]]:
        record, offset = self._steps[step][1][(kind, name)]
        refs = []
        for desc in record.leaves:
            if desc.layout == values.CHUNKED:
                loc: Any = desc.chunks
            else:
                loc = (offset, desc.nbytes)
                offset += desc.nbytes or 0
            refs.append(LeafRef(desc, loc))
        return record.structure, refs

    def stored_chunks(self, ref: LeafRef) -> Optional[int]:
        return len(ref.loc)

    def chunks(self, ref: LeafRef) -> Iterator[Tuple[Tuple[int, ...], int, bytes]]:
        for chunk in ref.loc:
            yield chunk.offset, chunk.mask, read_payload(self._data, chunk.address, chunk.size)

    def plain(self, ref: LeafRef) -> np.ndarray:
        offset, size = ref.loc
        desc = ref.desc
        return np.frombuffer(read_payload(self._fh, offset, size), dtype=desc.numpy_dtype).reshape(desc.shape).copy()

    def close(self) -> None:
        self._fh.close()
        if self._data is not None:
            self._data.close()
