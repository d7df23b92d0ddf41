"""What can be stored: arrays and scalars as leaves (a structure of them: structures.py).

A recorded value is either one leaf or a structure (dicts, lists, tuples,
namedtuples, None, as `Session.run` returns them) of leaves. Each leaf becomes a
*storage array* that HDF5 holds natively, plus the few facts needed to give the
caller back exactly what it stored:

- numeric dtypes (bool, ints, uints, floats, complex) and fixed bytes ("S") are
  stored as they are;
- dtypes HDF5 has no type for (bfloat16 and the other ml_dtypes, datetime64,
  timedelta64) are stored as unsigned integers of the same width, bit for bit,
  with the original dtype in `logical`;
- strings (object arrays of bytes or str, "U" arrays, Python bytes/str) are stored
  as one uint8 blob: the little-endian u64 length of each string, then the bytes
  of all of them; `logical` says which kind of strings, `shape` their array shape;
- a random draw kept as its generator's key and counter (drawn.py) is stored as those three
  uint64, with the generator and dtype in `logical` and the draw's shape in `shape`.
"""

from __future__ import annotations

import sys
import zlib
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import numpy as np

from ..errors import UnsupportedValue
from . import _codec
from .drawn import Drawn, from_storage, is_drawn

# Leaf layouts.
CHUNKED = "chunked"  # an array over PLAIN_MAX_BYTES: shuffled, zstd, chunked
PLAIN = "plain"  # a scalar or a small array: stored uncompressed, inline in the step's index
# An array of at most this many bytes (a bias, a batch-norm scale) is stored plain: compressing it
# saves less than HDF5's own bytes per dataset, and reading it chunked costs ~10x (measured).
PLAIN_MAX_BYTES = 4096
# What a replay reads at every step (inputs, draws, losses, learning rates) is plain up to this size
# a leaf: it then lies in its block of steps (docs/FORMAT.md), read with its neighbours' at once.
LIGHT_PLAIN_MAX_BYTES = 1 << 20

# Leaf forms: what the caller gets back.
ARRAY = "array"  # np.ndarray
NUMPY_SCALAR = "scalar"  # np.float32(1.0), ...
PYTHON = "python"  # int, float, bool, complex, bytes, str

LOGICAL_BYTES = "object:bytes"
LOGICAL_STR = "object:str"

_NATIVE_KINDS = "biufcS"
_BITS_KINDS = "Mm"
_PY_SCALARS = (bool, int, float, complex, bytes, str)
# A "U" string array is as wide as its widest item, or wider if made so; a width far beyond its
# text is a damaged or hostile descriptor asking for memory (a 100M-char dtype costs 400 MB).
MAX_STRING_SLACK, STRING_FLOOR = 16, 16 << 20


@dataclass
class Leaf:
    """One storage-ready leaf: `array` is what HDF5 holds, `shape` the caller's shape
    (they differ only for strings), the rest turns it back into the caller's value."""

    array: np.ndarray
    shape: Tuple[int, ...]
    logical: Optional[str]
    form: str
    plain_max: Optional[int] = None  # the most bytes it is stored plain with; None: PLAIN_MAX_BYTES

    @property
    def layout(self) -> str:
        limit = PLAIN_MAX_BYTES if self.plain_max is None else self.plain_max
        return CHUNKED if self.array.ndim >= 1 and self.array.nbytes > limit else PLAIN

    @property
    def dtype(self) -> str:
        return self.array.dtype.str

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)


def is_strings(logical: Optional[str]) -> bool:
    return logical is not None and (logical in (LOGICAL_BYTES, LOGICAL_STR) or logical.lstrip("<>|=").startswith("U"))


def _ml_dtype(name: str) -> Optional[np.dtype]:
    """numpy dtypes that TensorFlow registers (bfloat16, ...), found without importing TF."""
    try:
        import ml_dtypes  # installed with TF >= 2.11
    except ImportError:
        pass
    else:
        found = getattr(ml_dtypes, name, None)
        if found is not None:
            return np.dtype(found)
    tf = sys.modules.get("tensorflow")  # TF 1.15 registers its own bfloat16
    as_dtype = getattr(getattr(tf, name, None), "as_numpy_dtype", None)
    return np.dtype(as_dtype) if as_dtype is not None else None


def logical_dtype(logical: str) -> np.dtype:
    try:
        return np.dtype(logical)
    except TypeError:
        if not logical.startswith(("bfloat", "float", "int", "uint")):
            raise ValueError("unknown dtype %r" % (logical,)) from None
        found = _ml_dtype(logical)
        if found is None:
            raise UnsupportedValue(
                "dtype %r needs the ml_dtypes package (pip install ml_dtypes) "
                "or TensorFlow imported first" % (logical,)
            )
        return found


def is_ml_dtype(dtype: np.dtype) -> bool:
    """A dtype ml_dtypes or TensorFlow registers (bfloat16, float8_*, int4): numpy says "V"."""
    if dtype.kind != "V" or dtype.fields is not None or dtype.subdtype is not None:
        return False
    return not dtype.name.startswith("void")


def contiguous(arr: np.ndarray) -> np.ndarray:
    """C-contiguous, keeping 0-d arrays 0-d (np.ascontiguousarray makes them 1-d)."""
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def is_leaf(value: Any) -> bool:
    return isinstance(value, (np.ndarray, np.generic, Drawn) + _PY_SCALARS)


def make_leaf(value: Any, where: str) -> Leaf:
    """Turn one array or scalar into a storage-ready Leaf; `where` names it in errors."""
    if isinstance(value, np.ma.MaskedArray):
        raise UnsupportedValue("%s: a masked array cannot be stored (its mask would be lost); store "
                               "its .data and .mask as two values" % where)
    if isinstance(value, Drawn):
        return Leaf(value.storage(), value.shape, value.logical, ARRAY)
    if isinstance(value, np.ndarray):
        form, arr = ARRAY, np.asarray(value)  # subclasses (np.matrix, ...) as plain arrays
    elif isinstance(value, np.generic):
        form, arr = NUMPY_SCALAR, np.asarray(value)
    elif isinstance(value, (bytes, str)):
        form, arr = PYTHON, np.empty((), dtype=object)
        arr[()] = value
    elif isinstance(value, _PY_SCALARS):
        form, arr = PYTHON, np.asarray(value)
        if arr.dtype.kind == "O":
            raise UnsupportedValue("%s: the integer %r does not fit in 64 bits" % (where, value))
    else:
        raise UnsupportedValue(
            "%s: cannot store a %s; store numpy arrays, scalars, bytes or str, or "
            "dicts/lists/tuples of them" % (where, type(value).__name__)
        )
    shape = tuple(int(d) for d in arr.shape)
    dtype = arr.dtype
    if dtype.kind in _NATIVE_KINDS:
        return Leaf(contiguous(arr), shape, None, form)
    if dtype.kind in _BITS_KINDS or is_ml_dtype(dtype):
        bits = contiguous(arr).view("u%d" % dtype.itemsize)
        return Leaf(bits, shape, dtype.str if dtype.kind in _BITS_KINDS else dtype.name, form)
    if dtype.kind == "U":
        return _strings_leaf([s.encode("utf-8") for s in arr.ravel().tolist()], shape, dtype.str, form)
    if dtype.kind == "O":
        items = arr.ravel().tolist()
        if all(isinstance(x, bytes) for x in items):
            return _strings_leaf(items, shape, LOGICAL_BYTES, form)
        if all(isinstance(x, str) for x in items):
            return _strings_leaf([s.encode("utf-8") for s in items], shape, LOGICAL_STR, form)
        kinds = sorted({type(x).__name__ for x in items})
        raise UnsupportedValue(
            "%s: object array holding %s; only arrays of bytes or of str (not both) can be "
            "stored (convert it to a numeric dtype)" % (where, ", ".join(kinds))
        )
    raise UnsupportedValue("%s: dtype %s is not data tracekit can store" % (where, dtype))


def _strings_leaf(items: List[bytes], shape: Tuple[int, ...], logical: str, form: str) -> Leaf:
    blob = strings_blob(items)
    return Leaf(np.frombuffer(blob, dtype=np.uint8).copy(), shape, logical, form)


def strings_blob(items: List[bytes]) -> bytes:
    """The canonical bytes of a list of strings: little-endian u64 lengths, then the bytes."""
    lengths = np.array([len(b) for b in items], dtype="<u8")
    return lengths.tobytes() + b"".join(items)


def strings_from_blob(blob: bytes, count: int) -> List[bytes]:
    head = 8 * count
    if len(blob) < head:
        raise ValueError("string blob shorter than its length table")
    lengths = np.frombuffer(blob[:head], dtype="<u8")
    out, pos = [], head
    for n in lengths.tolist():
        out.append(blob[pos:pos + n])
        pos += n
    if pos != len(blob):
        raise ValueError("string blob lengths do not add up")
    return out


def checksum(storage: np.ndarray) -> int:
    """crc32 of a leaf's raw bytes (of its blob for strings)."""
    return zlib.crc32(contiguous(storage).reshape(-1).view(np.uint8)) & 0xFFFFFFFF


def check_leaf(storage: np.ndarray, shape: Tuple[int, ...], logical: Optional[str], form: str) -> None:
    """Raise ValueError if a leaf's descriptor does not fit its storage array. The checksum
    covers the bytes only; this catches damaged or edited attributes instead of returning
    a different value."""
    if form not in (ARRAY, NUMPY_SCALAR, PYTHON):
        raise ValueError("unknown leaf form %r" % (form,))
    if form != ARRAY and shape != ():
        raise ValueError("a scalar leaf has shape %s" % (shape,))
    if is_drawn(logical):
        from_storage(storage, shape, str(logical))
        return
    if is_strings(logical):
        if storage.dtype != np.uint8 or storage.ndim != 1:
            raise ValueError("a string leaf's blob is %s %s, not 1-d uint8" % (storage.dtype, storage.shape))
        if logical not in (LOGICAL_BYTES, LOGICAL_STR):
            wide = np.dtype(logical)
            if wide.kind != "U":
                raise ValueError("unknown string kind %r" % (logical,))
            count = float(np.prod(shape, dtype=np.float64))
            if count * wide.itemsize > max(MAX_STRING_SLACK * storage.nbytes, STRING_FLOOR):
                raise ValueError("%s strings of %d bytes of text declared %s: far wider than the text"
                                 % (shape, storage.nbytes, logical))
        return
    if tuple(storage.shape) != tuple(shape):
        raise ValueError("stored shape %s, logical shape %s" % (storage.shape, shape))
    if logical is None:
        if storage.dtype.kind not in _NATIVE_KINDS:
            raise ValueError("storage dtype %s is not one tracekit writes" % storage.dtype)
        return
    dtype = logical_dtype(logical)
    if not (dtype.kind in _BITS_KINDS or is_ml_dtype(dtype)) or storage.dtype.kind != "u" \
            or dtype.itemsize != storage.dtype.itemsize:
        raise ValueError("logical dtype %s does not fit storage dtype %s" % (logical, storage.dtype))


def restore_leaf(storage: np.ndarray, shape: Tuple[int, ...], logical: Optional[str], form: str) -> Any:
    """The caller's value from a decoded storage array."""
    check_leaf(storage, shape, logical, form)
    if is_drawn(logical):
        return from_storage(storage, shape, str(logical)).values()
    if is_strings(logical):
        count = 1
        for d in shape:
            count *= d
        items = strings_from_blob(storage.tobytes(), count)
        if logical in (LOGICAL_BYTES, LOGICAL_STR):
            arr = np.empty(count, dtype=object)
            arr[:] = items if logical == LOGICAL_BYTES else [b.decode("utf-8") for b in items]
        else:  # a "U" array
            arr = np.array([b.decode("utf-8") for b in items], dtype=np.dtype(logical))
        arr = arr.reshape(shape)
    elif logical is not None:
        arr = storage.view(logical_dtype(logical))
    else:
        arr = storage
    if form == ARRAY:
        return arr
    if form == NUMPY_SCALAR:
        return arr[()]
    return arr[()] if arr.dtype.kind == "O" else arr.item()


# How much of an array estimate_stored compresses to learn its ratio.
ESTIMATE_BYTES = 1 << 20


def estimate_stored(value: Any, level: Optional[int] = None, light: bool = False) -> int:
    """About how many bytes a golden takes to store `value` whole: its first ESTIMATE_BYTES
    compressed as the writer would (at its default level, unless `level` is given), scaled to its
    size (a size budget plans with it). `light`: a value of LIGHT_KINDS, counted whole up to
    LIGHT_PLAIN_MAX_BYTES as the writer counts it (its block compresses it later)."""
    if isinstance(value, Drawn):
        return value.storage().nbytes
    array = np.asarray(value)
    if array.dtype.kind not in "biufc" or array.nbytes <= (LIGHT_PLAIN_MAX_BYTES if light else PLAIN_MAX_BYTES):
        return int(array.nbytes) if array.dtype.kind != "O" else 1024
    flat = np.ascontiguousarray(array).reshape(-1)
    head = flat[:max(1, ESTIMATE_BYTES // flat.itemsize)]
    packed = sum(len(payload) for _, _, payload in _codec.encode_array(head, (head.size,), level))
    return int(array.nbytes * packed / head.nbytes) + 1
