"""Random draws kept as where their generator stood, not as their values (golden format 4).

TF 1.15's seeded `RandomUniform` op (dropout's masks, `tf.random.uniform`) is TensorFlow's
Philox4x32-10 counter generator: the op's (seed, seed2) attributes are its key, each run takes
the counters from where the last left off, and each 32 bits become one float32 (two 32-bit words
one float64) with the mantissa taken from them. Given the key and the first counter, numpy makes
the same values bit for bit, so a golden can keep 24 bytes where the draw has megabytes; the
recorder keeps a draw so only after making it here and finding it equal to what the step drew
(record/regenerated.py). A reader gives back the values (`values`). Python 3.7 syntax.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np

PREFIX = "philox-uniform:"  # a leaf's logical dtype: PREFIX + the draw's dtype
DTYPES = ("float32", "float64")
_WORDS = {"float32": 1, "float64": 2}  # 32-bit words of a value
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_LOW = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)
_U64 = (1 << 64) - 1
# The most values a stored draw may declare: a damaged file must not ask for unbounded memory.
MAX_COUNT = 1 << 31


@dataclass(frozen=True)
class Drawn:
    """A uniform draw in [0, 1) as its generator made it: the key (seed, seed2, as unsigned 64
    bits), the first 128-bit counter's low 64 bits (`offset`), the shape and dtype."""

    seed: int
    seed2: int
    offset: int
    shape: Tuple[int, ...]
    dtype: str

    @property
    def count(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def logical(self) -> str:
        return PREFIX + self.dtype

    def storage(self) -> np.ndarray:
        return np.array([self.seed & _U64, self.seed2 & _U64, self.offset & _U64], dtype="<u8")

    def values(self) -> np.ndarray:
        return uniform(self.seed, self.seed2, self.offset, self.count, self.dtype).reshape(self.shape)


def is_drawn(logical: Optional[str]) -> bool:
    return bool(logical) and str(logical).startswith(PREFIX)


def dtype_of(logical: str) -> str:
    """The dtype of the values a draw's leaf of logical dtype `logical` stands for."""
    return str(logical)[len(PREFIX):]


def drawn_bytes(shape: Tuple[int, ...], logical: str) -> int:
    """The bytes of the values a draw of `shape` and logical dtype `logical` stands for."""
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype_of(logical)).itemsize


def from_storage(storage: np.ndarray, shape: Tuple[int, ...], logical: str) -> Drawn:
    """The Drawn a leaf holds; ValueError where its descriptor cannot be one."""
    dtype = dtype_of(logical)
    if dtype not in DTYPES:
        raise ValueError("a draw of dtype %r, which no generator here makes" % (dtype,))
    if storage.dtype.kind != "u" or storage.dtype.itemsize != 8 or storage.shape != (3,):
        raise ValueError("a draw's generator is stored as %s %s, not three uint64" % (storage.dtype, storage.shape))
    if any(d < 0 for d in shape) or float(np.prod(shape, dtype=np.float64)) > MAX_COUNT:
        raise ValueError("a draw declared of shape %s" % (shape,))
    seed, seed2, offset = (int(x) for x in storage.astype("<u8"))
    return Drawn(seed, seed2, offset, tuple(int(d) for d in shape), dtype)


def uniform(seed: int, seed2: int, offset: int, count: int, dtype: str = "float32") -> np.ndarray:
    """The `count` values TF's CPU uniform kernel makes from the generator at (key, offset)."""
    words = _WORDS[dtype]
    bits = philox(seed, seed2, offset, (count * words + 3) // 4)
    if words == 1:
        mantissa = (bits[:count] & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)
        return mantissa.view(np.float32) - np.float32(1.0)
    pairs = bits[:2 * count].astype(np.uint64).reshape(-1, 2)
    mantissa = ((pairs[:, 0] << _32) | pairs[:, 1]) & np.uint64((1 << 52) - 1)
    return (mantissa | np.uint64(1023 << 52)).view(np.float64) - 1.0


def philox(seed: int, seed2: int, offset: int, blocks: int) -> np.ndarray:
    """Philox4x32-10's outputs for `blocks` counters from `offset` (four uint32 each, in order):
    the key is seed's two halves, the counter's high 64 bits are seed2 (TensorFlow's layout)."""
    seed, seed2 = seed & _U64, seed2 & _U64
    k0, k1 = seed & 0xFFFFFFFF, seed >> 32
    with np.errstate(over="ignore"):
        counter = np.arange(blocks, dtype=np.uint64) + np.uint64(offset & _U64)
    c0, c1 = counter & _LOW, counter >> _32
    c2 = np.full(blocks, seed2 & 0xFFFFFFFF, np.uint64)
    c3 = np.full(blocks, seed2 >> 32, np.uint64)
    for _ in range(10):
        p0, p1 = c0 * _M0, c2 * _M1  # exact: 32 x 32 bits fit in 64
        c0, c1, c2, c3 = (p1 >> _32) ^ c1 ^ np.uint64(k0), p1 & _LOW, (p0 >> _32) ^ c3 ^ np.uint64(k1), p0 & _LOW
        k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
    return np.stack([c0, c1, c2, c3], axis=1).astype(np.uint32).reshape(-1)


def stride(count: int) -> int:
    """How far one run of a draw of `count` values moves its generator (TF reserves 256
    counters per value, whatever the distribution needs)."""
    return count * 256


def matches(drawn: Drawn, value: Any) -> bool:
    """Whether `value` is exactly the draw `drawn` makes (bit for bit, shape and dtype)."""
    value = np.asarray(value)
    if value.dtype.name != drawn.dtype or tuple(value.shape) != drawn.shape:
        return False
    made = drawn.values()
    return bool(np.array_equal(made.reshape(-1).view(np.uint8), np.ascontiguousarray(value).reshape(-1).view(np.uint8)))
