"""Typed metadata records (store/meta.py): every shipped golden's metadata round-trips through
them exactly, an older golden's absent keys read as their defaults, a newer one's unknown keys
are kept (hypothesis)."""

from __future__ import annotations

import glob
import os

from hypothesis import given, settings
from hypothesis import strategies as st

import tracekit
from tracekit.keys import PROGRAM, RECORDING, REPLAY
from tracekit.store.meta import ProgramMeta, RecordingMeta, ReplayMeta, replay_of, round_trip

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED = sorted(glob.glob(os.path.join(ROOT, "goldens", "*.h5")) +
                 glob.glob(os.path.join(ROOT, "tests", "data", "**", "*.h5"), recursive=True))


def test_every_shipped_golden_round_trips_through_the_records():
    assert len(SHIPPED) >= 9
    for path in SHIPPED:
        with tracekit.open(path) as golden:
            meta = golden.meta
            assert round_trip(meta) == meta, path
            recording = RecordingMeta.of(meta[RECORDING])
            assert recording.every >= 1 and recording.given >= {"every", "steps_limit"}, path
            assert ProgramMeta.of(meta[PROGRAM]).entry, path
            assert replay_of(meta) is None  # recordings, not replays


def test_an_older_goldens_absent_keys_read_as_their_defaults():
    old = ReplayMeta.of({"golden": "g.h5", "steps": 3})  # written before most fields existed
    assert (old.init, old.random, old.forcing, old.every, old.not_replayed, old.own_initial) == \
        ("golden", "tape", "none", 1, {}, [])
    assert old.to_meta() == {"golden": "g.h5", "steps": 3}  # written back as it was
    assert RecordingMeta.of(None).every == 1 and replay_of({REPLAY: "not a section"}) is None
    made = ReplayMeta.made(golden="g.h5", steps=3)
    assert set(made.to_meta()) == set(ReplayMeta.known())  # tracekit writes every field


plain = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                     max_leaves=6)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(ReplayMeta.known() + ["future", "x"]), plain, max_size=8),
       st.sampled_from([ReplayMeta, RecordingMeta, ProgramMeta]))
def test_a_section_round_trips_whatever_it_holds(section, record):
    assert record.of(section).to_meta() == section
    changed = record.of(section).but(**{record.known()[0]: "changed"})
    assert changed.to_meta()[record.known()[0]] == "changed"


def test_the_format_documents_every_field_of_every_record():
    with open(os.path.join(ROOT, "docs", "FORMAT.md")) as f:
        rows = {line.split("`")[1]: line for line in f.read().splitlines() if line.startswith("  | `")}
    for section, record in ((RECORDING, RecordingMeta), (PROGRAM, ProgramMeta), (REPLAY, ReplayMeta)):
        undocumented = [name for name in record.known() if "`%s`" % name not in rows[section]]
        assert not undocumented, (section, undocumented)
