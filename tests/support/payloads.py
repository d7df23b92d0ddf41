"""Deterministic test values, the same in both environments (numpy 1.18 and 2.x).

Used in-process and by child processes (crash tests, cross-environment tests), so
it runs on Python 3.7 and imports nothing but numpy and tracekit.
"""

from __future__ import annotations

import collections
import struct

import numpy as np

Pair = collections.namedtuple("Pair", ["first", "second"])


def bfloat16():
    """The bfloat16 numpy dtype of whichever TensorFlow world this is, or None."""
    try:
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    except ImportError:
        pass
    try:
        import tensorflow as tf  # TF 1.15 registers its own bfloat16 with numpy
    except ImportError:
        return None
    return np.dtype(tf.bfloat16.as_numpy_dtype)


def nan_payloads():
    """float32 NaNs with distinct payloads and signs, infinities, -0.0: bits must survive."""
    bits = [0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFFFFFFF, 0x7F800000, 0xFF800000, 0x80000000, 0]
    return np.array(bits, dtype="<u4").view("<f4")


def dtype_cases():
    """name -> array covering every storable dtype family."""
    rng = np.random.RandomState(7)
    cases = collections.OrderedDict()
    for dt in ["f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "c8", "c16"]:
        cases[dt] = (rng.randn(13, 5) * 100).astype(dt)
    cases["longdouble"] = (rng.randn(7) * 1e10).astype(np.longdouble)
    cases["clongdouble"] = (rng.randn(4) + 1j * rng.randn(4)).astype(np.clongdouble)
    cases["bool"] = rng.rand(3, 4, 5) > 0.5
    cases["big-endian f4"] = rng.randn(6).astype(">f4")
    cases["nan payloads"] = nan_payloads()
    cases["nan payloads f64"] = np.array([0x7FF8000000000001, 0xFFF0000000000001], dtype="<u8").view("<f8")
    cases["fixed bytes"] = np.array([b"ab\x00", b"", b"xyz"], dtype="S3")
    cases["unicode"] = np.array([[u"h\u00e9", u"", u"\u4e2d\x00x"]], dtype="U3")
    obj = np.empty((2, 2), dtype=object)
    obj[:] = [[b"tf", b"\x00\xff"], [b"", b"string"]]
    cases["object bytes"] = obj
    strs = np.empty(3, dtype=object)
    strs[:] = [u"a", u"\u00fc", u""]
    cases["object str"] = strs
    cases["datetime64"] = np.array(["2020-01-01T00:00:01", "NaT"], dtype="datetime64[ns]")
    cases["timedelta64"] = np.array([1, -5], dtype="timedelta64[ms]")
    cases["zero-size"] = np.zeros((0, 3), dtype="f4")
    cases["zero-size object"] = np.empty((0,), dtype=object)
    cases["0-d array"] = np.array(3.5, dtype="f8")
    cases["non-contiguous"] = rng.randn(10, 8).astype("f4")[::2, ::3].T
    cases["multi-chunk"] = rng.randn(1100, 1000).astype("f4")  # 4.4 MB: chunks with a partial edge
    cases["wide row"] = rng.randint(0, 255, size=(2, 5 << 20)).astype("u1")  # a row over the chunk size
    cases["incompressible"] = np.frombuffer(rng.bytes(1 << 16), dtype="u1").copy()
    bf = bfloat16()
    if bf is not None:
        cases["bfloat16"] = np.array([1.5, -2.0, 3.14159, 0.0], dtype="f4").astype(bf)
    return cases


def scalar_cases():
    return collections.OrderedDict([
        ("np.float32", np.float32(1.25)),
        ("np.int64", np.int64(-3)),
        ("np.bool_", np.bool_(True)),
        ("np.complex64", np.complex64(1 + 2j)),
        ("python int", 7),
        ("python float", 0.1),
        ("python bool", False),
        ("python complex", 2j),
        ("python bytes", b"ab\x00"),
        ("python str", u"caf\u00e9"),
    ])


def structure_case():
    return {"loss": np.float32(0.5), "outs": [np.arange(3), None, (b"x", Pair(1, u"y"))],
            7: {"nested": {"deep": np.ones((2, 2), dtype="f2")}}, b"k": [], "t": ()}


def same(a, b):
    """Bit-exact equality of two stored values, structure included."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return (type(a) is type(b) or (_namedtuple(a) and _namedtuple(b) and type(a).__name__ == type(b).__name__
                                        and a._fields == b._fields)) and len(a) == len(b) and \
            all(same(x, y) for x, y in zip(a, b))
    if a is None or b is None:
        return a is b
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if type(a) is not type(b) or a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype.kind == "O":
            return a.ravel().tolist() == b.ravel().tolist() and \
                all(type(x) is type(y) for x, y in zip(a.ravel().tolist(), b.ravel().tolist()))
        if a.dtype in (np.dtype(np.longdouble), np.dtype(np.clongdouble)):
            # x87 long doubles carry padding bytes whose content differs between processes.
            return bool(np.array_equal(a, b))
        return a.tobytes() == b.tobytes()  # tobytes() is C order whatever the strides
    if isinstance(a, np.generic):
        return type(a) is type(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes()
    return type(a) is type(b) and (a == b or (isinstance(a, float) and struct.pack("<d", a) == struct.pack("<d", b)))


def _namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def step_values(step, big=False):
    """What a test writer records at `step`: derived from the step index alone."""
    rng = np.random.RandomState(1000 + step)
    n = 600 if big else 60
    return collections.OrderedDict([
        ("input/x:0", rng.randn(8, 3).astype("f4")),
        ("tap/dense/Relu:0", rng.rand(8, n).astype("f4")),
        ("loss/loss", np.float32(rng.rand())),
        ("lr/learning_rate", np.float32(1e-3 * (1 - step / 1000.0))),
        ("grad/dense/kernel:0", rng.randn(3, n).astype("f4")),
        ("var/dense/kernel:0", (np.arange(3 * n, dtype="f4").reshape(3, n) * 0.01 + step * 1e-3).astype("f4")),
        ("var/global_step:0", np.int64(step + 1)),
        ("fetch/train", [None, np.float32(step)]),
        ("fetch/run", None),  # what sess.run(train_op) returns: a value without leaves
    ])


def initial_values():
    return collections.OrderedDict([
        ("var/dense/kernel:0", (np.arange(3 * 60, dtype="f4").reshape(3, 60) * 0.01).astype("f4")),
        ("var/global_step:0", np.int64(0)),
    ])
