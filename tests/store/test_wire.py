"""The journal's records: what to_wire writes is what from_wire reads, the keys are the
ones docs/FORMAT.md lists, and anything off the schema is a ValueError."""

from __future__ import annotations

import pytest

from tracekit.store._wire import (Chunk, LeafDescriptor, MetaRecord, OpenRecord, StepRecord, ValueRecord,
                                  record_from_wire)

CHUNKED = LeafDescriptor("chunked", (4, 3), "<f4", None, "array", 123, chunk=(2, 3), level=3, delta_base=-1,
                         chunks=(Chunk((0, 0), 0, 10, 512), Chunk((2, 0), 2, 24, 600)))
PLAIN = LeafDescriptor("plain", (17,), "|u1", "object:str", "array", 7, logical_shape=(2,), nbytes=17)


@pytest.mark.parametrize("record", [
    OpenRecord(1, "tracekit x", "2026-01-01T00:00:00+00:00", "abc", {"user": {"a": 1}}),
    ValueRecord(3, 0, "var", "dense/kernel:0", None, (CHUNKED,)),
    ValueRecord(4, -1, "fetch", "train", ["list", [["leaf"], ["none"]]], (PLAIN,)),
    StepRecord(3, 0, {"global_step": 1}, 1),
    StepRecord(5, 1, {}, None),
    MetaRecord({"replay": {"steps": 2}}),
])
def test_records_round_trip(record):
    assert record_from_wire(record.to_wire()) == record


def test_the_wire_keys_are_the_documented_ones():
    assert set(CHUNKED.to_wire()) == {"l", "sh", "dt", "lg", "f", "crc", "ch", "lv", "e", "b", "cs"}
    assert set(PLAIN.to_wire()) == {"l", "sh", "dt", "lg", "f", "crc", "ls", "n"}
    assert set(ValueRecord(0, 0, "loss", "loss", None, (PLAIN,)).to_wire()) == {"t", "q", "s", "k", "n", "st", "leaves"}
    assert set(StepRecord(0, 0, {}, 2).to_wire()) == {"t", "q", "s", "info", "n"}
    assert CHUNKED.stored_bytes == 34 and CHUNKED.raw_bytes == 48 and PLAIN.caller_shape == (2,)


def test_a_newer_record_type_is_skipped():
    assert record_from_wire({"t": "annotation", "text": "from a newer writer"}) is None


@pytest.mark.parametrize("wire, message", [
    ({"q": 1}, "without a type"),
    ({"t": "value", "q": 1, "s": 0, "k": "weights", "n": "a", "st": None, "leaves": [PLAIN.to_wire()]},
     "unknown kind 'weights'"),
    ({"t": "value", "q": 1, "s": 0, "k": "var", "n": "a", "st": None, "leaves": []}, "0 leaves whose structure holds 1"),
    ({"t": "value", "q": 1, "s": 0, "k": "var", "n": "a", "st": ["none"]}, "without a list of leaves"),
    ({"t": "value", "q": 1, "s": 0, "k": "var", "n": "a", "st": ["none"], "leaves": [PLAIN.to_wire()]},
     "1 leaves whose structure holds 0"),
    ({"t": "value", "q": "1", "s": 0, "k": "var", "n": "a", "st": None, "leaves": [PLAIN.to_wire()]},
     "attempt '1' is not an integer"),
    ({"t": "step", "q": 1, "s": 0, "info": [1, 2]}, "step info is not a map"),
    ({"t": "open", "format": None}, "format version None"),
])
def test_records_off_the_schema(wire, message):
    with pytest.raises(ValueError, match=message):
        record_from_wire(wire)


@pytest.mark.parametrize("change, message", [
    ({"l": "sparse"}, "unknown leaf layout 'sparse'"),
    ({"ch": None}, "chunked leaf of shape"),
    ({"ch": [2]}, "chunked leaf of shape"),
    ({"sh": [4, -3]}, "leaf shape"),
    ({"dt": "not-a-dtype"}, "not a numpy dtype"),
    ({"f": "matrix"}, "unknown leaf form"),
    ({"e": "zigzag"}, "unknown delta encoding"),
    ({"cs": [[[0, 0], 0, 10]]}, "offset, mask, size, address"),
    ({"crc": 1.5}, "leaf checksum"),
])
def test_leaf_descriptors_off_the_schema(change, message):
    with pytest.raises(ValueError, match=message):
        LeafDescriptor.from_wire(dict(CHUNKED.to_wire(), **change))


def test_a_plain_leaf_needs_its_byte_count():
    wire = PLAIN.to_wire()
    del wire["n"]
    with pytest.raises(ValueError, match="plain leaf without a byte count"):
        LeafDescriptor.from_wire(wire)
