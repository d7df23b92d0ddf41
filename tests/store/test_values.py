"""Every storable value round-trips bit-exactly; anything that is not data is refused."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import tracekit
from tracekit.store import structures, values

from ..support import payloads

CASES = payloads.dtype_cases()


@pytest.mark.parametrize("name", list(CASES))
def test_array_roundtrip(roundtrip, name):
    value = CASES[name]
    got = roundtrip({"fetch/x": value})["fetch/x"]
    expected = values.contiguous(value)
    assert payloads.same(expected, got), (name, value, got)


def test_bfloat16_is_covered():
    # TF 2 brings ml_dtypes; TF 1.15 registers its own bfloat16. Both environments have one.
    assert payloads.bfloat16() is not None
    assert "bfloat16" in CASES


@pytest.mark.parametrize("name", list(payloads.scalar_cases()))
def test_scalar_roundtrip(roundtrip, name):
    value = payloads.scalar_cases()[name]
    got = roundtrip({"loss/x": value})["loss/x"]
    assert payloads.same(value, got), (value, got, type(got))


def test_structures_roundtrip(roundtrip):
    value = payloads.structure_case()
    got = roundtrip({"fetch/run": value})["fetch/run"]
    assert payloads.same(value, got), got
    assert type(got["outs"][2][1]).__name__ == "Pair" and got["outs"][2][1]._fields == ("first", "second")


def test_none_and_empty_structures(roundtrip):
    got = roundtrip({"fetch/op": None, "fetch/empty": [], "fetch/pair": (None, [None])})
    assert got == {"fetch/op": None, "fetch/empty": [], "fetch/pair": (None, [None])}


def test_nan_bits_survive(roundtrip):
    value = payloads.nan_payloads()
    got = roundtrip({"grad/g": value})["grad/g"]
    assert got.view("<u4").tolist() == value.view("<u4").tolist()
    half = np.array([0x7E01, 0xFE42, 0x7C00, 0xFC00, 0x7DFF], dtype="<u2").view("<f2")  # NaN payloads, +-Inf
    assert roundtrip({"grad/h": half})["grad/h"].view("<u2").tolist() == half.view("<u2").tolist()


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix itself
def test_array_subclasses_are_stored_as_arrays(roundtrip):
    got = roundtrip({"fetch/m": np.matrix([[1, 2], [3, 4]], dtype=np.int32)})["fetch/m"]
    assert type(got) is np.ndarray and got.tolist() == [[1, 2], [3, 4]]


@pytest.mark.parametrize("bad, message", [
    (np.array([1, "a"], dtype=object), "object array holding int"),
    (object(), "cannot store a object"),
    ({"k": {1, 2}}, "cannot store a set"),
    (np.zeros(2, dtype=[("a", "f4"), ("b", "i4")]), "is not data"),
    ({(1, 2): np.zeros(1)}, "dict key (1, 2) of type tuple"),
    (2 ** 70, "does not fit in 64 bits"),
    ([lambda: 0], "cannot store a function"),
    (np.array([b"a", "b"], dtype=object), "object array holding bytes, str; only arrays of bytes or of str"),
    (np.ma.masked_array([1.0, 2.0], mask=[0, 1]), "a masked array cannot be stored"),
])
def test_not_data_is_refused(tmp_path, bad, message):
    with tracekit.create(str(tmp_path / "bad.h5")) as w:
        with w.step():
            with pytest.raises(tracekit.UnsupportedValue) as err:
                w.add("fetch", "bad/value:0", bad)
    assert message in str(err.value)
    assert "step 0, fetch/bad/value:0" in str(err.value)  # names the file position


def test_flatten_order_is_stable():
    spec, leaves = structures.flatten(collections.OrderedDict([("b", 1), ("a", [2, 3])]), "x")
    assert leaves == [1, 2, 3]
    assert structures.unflatten(spec, leaves) == {"b": 1, "a": [2, 3]}


@pytest.mark.parametrize("name", ["dense/kernel:0", "a%2Fb", ".", ".hidden", "x%y/%25", u"caf\u00e9/\u00fc:1",
                                  "with space", "a//b/", "scope>name-1.2_x"])
def test_names_roundtrip(tmp_path, name):
    path = str(tmp_path / "names.h5")
    with tracekit.create(path) as w:
        with w.step():
            w.add("tap", name, np.arange(3))
            w.add("tap", name + "/child", np.arange(2))  # a name that extends another one
    with tracekit.open(path) as trace:
        assert trace.names("tap") == [name, name + "/child"]
        assert trace.step(0)["tap/" + name].tolist() == [0, 1, 2]
        assert trace.step(0)["tap/" + name + "/child"].tolist() == [0, 1]
