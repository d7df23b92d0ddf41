"""Every structure a recorder can be handed, generated: written, the writer killed at any
point, opened, verified and recovered, it comes back exactly as committed.

A process killed while it records leaves the unfinished golden and its journal as they were
at that moment. The journal is only ever appended to, and every chunk reaches the file before
the record naming it, so what a kill at any moment leaves is the finished journal cut at a
byte offset beside the data file: the test cuts it at generated offsets (record boundaries
and inside records). Real SIGKILLs: test_crash.py (synthetic steps with a leafless fetch) and
tests/record/test_killed_tf1.py (a TF1 loop that runs only its train op)."""

from __future__ import annotations

import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracekit
from tracekit.store import structures as store_structures
from tracekit.store._format import PARTIAL_SUFFIX, journal_path
from tracekit.store._journal import scan
from tracekit.store.recover import tmp_path as recovering

from ..support import payloads, structures

SETTINGS = settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                            HealthCheck.function_scoped_fixture])


def _write(path, recorded, info=True):
    """Record `recorded` (a list of {(kind, name): value} steps) with an initial state; leave the
    writer flushed and open: the files are what a kill now would leave. Returns the writer."""
    writer = tracekit.create(path)
    with writer.initial():
        writer.add("var", "init", None)
        writer.add("var", "w:0", payloads.initial_values()["var/dense/kernel:0"])
    for index, values in enumerate(recorded):
        with writer.step(info={"global_step": index + 1} if info else None):
            for (kind, name), value in values.items():
                writer.add(kind, name, value)
    writer.flush()
    return writer


def _check_steps(trace, recorded, count):
    assert len(trace) == count, (len(trace), count, trace.problem)
    assert payloads.same(trace.initial["var/init"], None)
    for index in range(count):
        step = trace.step(index)
        expected = {"%s/%s" % key: value for key, value in recorded[index].items()}
        assert sorted(step) == sorted(expected)
        for key, value in expected.items():
            assert payloads.same(value, step[key]), (index, key, value, step[key])
        assert step.info == {"global_step": index + 1}


def _copy_killed(path, dest, cut):
    """The files of `path`'s unfinished recording, its journal cut at byte `cut`, at `dest`."""
    shutil.copyfile(path + PARTIAL_SUFFIX, dest + PARTIAL_SUFFIX)
    with open(journal_path(path), "rb") as src, open(journal_path(dest), "wb") as out:
        out.write(src.read(cut))


def _committed_at(journal, cut):
    """(initial committed, steps committed) by the journal's first `cut` bytes."""
    ends = [(f.header.get("s"), f.offset + f.size) for f in scan(journal).frames if f.header.get("t") == "step"]
    done = [step for step, end in ends if end <= cut]
    return -1 in done, sum(1 for step in done if step >= 0)


@SETTINGS
@given(recorded=structures.steps(), cuts=st.lists(st.floats(0, 1), min_size=1, max_size=3))
def test_generated_structures_survive_a_kill_at_any_point(tmp_path_factory, recorded, cuts):
    work = str(tmp_path_factory.mktemp("kill"))
    path = os.path.join(work, "rec.h5")
    writer = _write(path, recorded)
    try:
        # the journal appears holding its opening record (_lock.create_locked): a kill cuts after it
        frames = scan(journal_path(path)).frames
        opened, size = frames[0].offset + frames[0].size, os.path.getsize(journal_path(path))
        for n, fraction in enumerate(sorted(set(cuts)) + [1.0]):
            cut = opened + int(fraction * (size - opened))
            killed = os.path.join(work, "killed%d.h5" % n)
            _copy_killed(path, killed, cut)
            initial, count = _committed_at(journal_path(killed), cut)
            if not initial:  # killed before the initial state was committed: nothing to read
                continue
            with tracekit.open(killed) as trace:
                assert not trace.complete and trace.problem
                _check_steps(trace, recorded, count)
            result = tracekit.verify(killed)
            assert not result.complete and len(result.problems) == 1 and "tracekit recover" in result.problems[0]
            assert tracekit.recover(killed).steps == count
            assert tracekit.verify(killed).ok
            with tracekit.open(killed) as trace:
                assert trace.complete and trace.recovered
                _check_steps(trace, recorded, count)
            assert not os.path.exists(journal_path(killed)) and not os.path.exists(recovering(killed))
    finally:
        writer.close()
    # and the finished golden holds it all
    with tracekit.open(path) as trace:
        assert trace.complete and not trace.recovered
        _check_steps(trace, recorded, len(recorded))
    assert tracekit.verify(path).ok


@SETTINGS
@given(value=structures.values())
def test_a_value_round_trips_and_the_journal_takes_its_record(tmp_path_factory, value):
    # The wire schema accepts every record the writer makes (a value record's leaves are as many
    # as its structure holds: none for None or []), and the value reads back bit for bit.
    path = str(tmp_path_factory.mktemp("one") / "one.h5")
    writer = _write(path, [{("fetch", "fetches"): value}])
    try:
        from tracekit.store._journal import Committed
        committed = Committed.of(scan(journal_path(path)))
        [(record, _)] = committed.steps[0][1]
        spec, leaves = store_structures.flatten(value, "test")
        assert record.structure == spec and len(record.leaves) == len(leaves)
    finally:
        writer.close()
    with tracekit.open(path) as trace:
        assert payloads.same(value, trace.step(0)["fetch/fetches"])


@pytest.mark.parametrize("spec, count", [
    (None, 1), (["none"], 0), (["list", []], 0), (["dict", [["a", ["none"]], ["b", ["list", []]]]], 0),
    (["tuple", [["leaf"], ["none"], ["leaf"]]], 2), (["namedtuple", "P", ["a", "b"], [["leaf"], ["dict", []]]], 1),
])
def test_leaf_count(spec, count):
    assert store_structures.leaf_count(spec) == count


@pytest.mark.parametrize("spec", [[], ["leaves"], ["list", 3], "leaf", ["list", [["list"] * 1]], ["dict", [["leaf"]]],
                                  ["namedtuple", "P", [["leaf"]]]])
def test_leaf_count_refuses_what_flatten_never_writes(spec):
    with pytest.raises(ValueError):
        store_structures.leaf_count(spec)
