"""ReplayOptions: replay()'s options as one object, checked once when made."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import tracekit
from tracekit.replay.options import ReplayOptions


def test_replay_takes_exactly_the_options_with_their_defaults(tf2):
    parameters = inspect.signature(tf2.replay).parameters
    keywords = {name: p.default for name, p in parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert keywords.pop("out") is None
    defaults = {f.name: f.default for f in dataclasses.fields(ReplayOptions) if f.name != "named"}
    assert keywords == defaults
    assert ReplayOptions.names() == set(defaults)


@pytest.mark.parametrize("bad, message", [
    (dict(init="zero"), "init must be 'golden'"),
    (dict(random="numpy"), "random must be 'tape', 'seed' or 'none'"),
    (dict(every=0), "every must be an integer >= 1"),
    (dict(every=True), "every must be an integer >= 1"),
    (dict(every=2.0), "every must be an integer >= 1"),
    (dict(forcing="all"), "forcing must be 'none'"),
    (dict(input_api="numpy"), "input_api must be 'dataset'"),
    (dict(steps=-1), "steps must be a whole number"),
    (dict(steps=2.5), "steps must be a whole number"),
])
def test_a_bad_option_is_refused_when_the_options_are_made(bad, message):
    with pytest.raises(tracekit.UsageError, match=message):
        ReplayOptions(**bad)
    with pytest.raises(tracekit.UsageError, match=message):
        ReplayOptions().but(**bad)  # a changed copy is checked again


def test_options_by_name_say_what_is_taken():
    assert ReplayOptions.of({"steps": np.int64(3), "every": 2}, "here") == ReplayOptions(steps=3, every=2)
    with pytest.raises(tracekit.UsageError, match=r"here: cannot pass on option\(s\) stesp; it takes replay\(\)'s "
                                                  r"options: .*steps"):
        ReplayOptions.of({"stesp": 3}, "here")
    with pytest.raises(tracekit.UsageError, match=r"cannot pass on option\(s\) forcing; .* but forcing, model, "
                                                  r"which it sets itself"):
        ReplayOptions.of({"forcing": "state"}, "here", frozenset({"forcing", "model"}))
    with pytest.raises(tracekit.UsageError, match="cannot pass on option.s. named"):
        ReplayOptions.of({"named": frozenset()}, "here")  # bookkeeping, not an option


def test_a_ports_own_options_join_the_callers_unless_both_name_one():
    caller = ReplayOptions.of({"steps": 2, "convert": ()}, "caller")
    assert caller.given() == {"steps": 2, "convert": ()}  # named, though convert=() is the default
    joined = caller.merged({"var_map": {"a": "b"}}, "port")
    assert joined.var_map == {"a": "b"} and joined.steps == 2
    with pytest.raises(tracekit.UsageError, match="convert given both by make_port"):
        caller.merged({"convert": ()}, "port")
    with pytest.raises(tracekit.UsageError, match="port: cannot pass on option.s. model"):
        caller.merged({"model": None}, "port", frozenset({"model"}))
    assert caller.merged({"convert": ("c",), "every": 2}, "port", clash="own").convert == ("c",)  # the port's win
    kept = caller.merged({"convert": ("c",), "every": 2}, "port", clash="caller")  # the caller's win
    assert kept.convert == () and kept.every == 2
    assert ReplayOptions(every=3).given() == {"every": 3}  # not named, but not the default
    assert ReplayOptions(convert=[]).convert == ()  # any sequence, kept as a tuple


def test_a_replays_metadata_is_its_typed_record_written_whole(tf2):
    from tools.ports import seed_example
    from tracekit.keys import REPLAY
    from tracekit.store.meta import ReplayMeta, round_trip

    from ..support import golden

    model, step = seed_example.make()
    with tf2.replay(golden("seed_example"), step, model=model, steps=2, every=2) as actual:
        meta = actual.meta
    assert round_trip(meta) == meta
    record = ReplayMeta.of(meta[REPLAY])
    assert record.given == set(ReplayMeta.known()) and not record.extra  # every field, nothing unknown
    assert (record.steps, record.every, record.limited, record.stopped, record.init) == (2, 2, True, False, "golden")
    assert record.golden.endswith("seed_example.h5") and record.mapping
