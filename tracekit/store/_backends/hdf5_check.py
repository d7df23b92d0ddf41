"""tracekit verify's check of a finished golden's step: its index against its datasets (reads
take the index alone, so damage to either must be found here)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, List

from ...keys import INITIAL_STEP, make_key
from .. import values
from .._format import escape_name
from .hdf5_index import chunked_leaf, plain_leaf


def cross_check(backend: Any, step: int) -> List[str]:
    """Where the step's index and its datasets disagree (tracekit verify): the values listed,
    each leaf's descriptor, and a plain leaf's bytes: reads take them from the index alone."""
    index = backend._index(step)
    if index is None:
        return []
    label = "%s: %s" % (backend.path, "initial state" if step == INITIAL_STEP else "step %d" % step)
    listed = set(backend._listed(step))  # a set: a step may hold thousands of values
    # format 2: a value whose leaves are all plain lies in the index alone
    stored = {key for key, (_, leaves) in index.items()
              if backend._blocks is None or any(wire.get("l") != values.PLAIN for wire in leaves)}
    problems = []
    if listed != stored:
        problems.append("%s: the step index lists other tensors than the file holds (%s)"
                        % (label, ", ".join(sorted(make_key(*k) for k in listed ^ stored))[:500]))
    for (kind, name), (spec, leaves) in index.items():
        if (kind, name) not in listed:
            continue
        obj = backend._group(step)["%s/%s" % (kind, escape_name(name))]
        datasets = [obj] if spec is None else [obj.get(str(i)) for i in range(len(leaves))]
        for wire, dataset in zip(leaves, datasets):
            where = "%s, %s" % (label, make_key(kind, name))
            if dataset is None:  # format 2: a plain leaf of a structure
                if wire.get("l") != values.PLAIN:
                    problems.append("%s: a chunked leaf the step index lists is missing; the file is damaged"
                                    % where)
                continue
            ref = backend._ref(dataset)
            if wire.get("l") != values.PLAIN:  # read as the index says: the dataset must say the same
                if chunked_leaf(wire) != ref.desc:
                    problems.append("%s: the step index and the dataset disagree; the file is damaged" % where)
                continue
            desc, data = plain_leaf(wire), wire["v"]
            if ref.desc.layout != values.PLAIN:
                problems.append("%s: the step index and the dataset disagree; the file is damaged" % where)
                continue
            stored = backend.plain(ref)
            crc = values.checksum(stored)
            if crc != ref.desc.crc:
                problems.append("%s: checksum mismatch (stored %08x, data %08x); the file is damaged: restore "
                                "it or record it again" % (where, ref.desc.crc, crc))
            elif replace(ref.desc, nbytes=desc.nbytes) != desc or stored.tobytes() != data:
                problems.append("%s: the step index and the dataset disagree; the file is damaged" % where)
    return problems
