"""Digests: what a golden keeps of a tensor at a step between its full keyframes.

A digest holds the tensor's shape and dtype, element count, sum, sum of squares, sum of
|x|, min, max and max |x| (over its finite elements, in float64), its NaN and Inf counts,
the crc32 of its bytes (none in a recording's digest of a float tensor: `recorded`), and its
values at up to SAMPLE fixed positions. A digest made by TensorFlow where the value is
(record/graph_digests.py, golden format 3) has no sum of |x| (nan) and states the round-off
of its sums (`roundoff`): they are accumulated in the tensor's precision over blocks, then in
float64. The positions depend on the element count alone
(`positions`), so a replay samples the same elements as the recording did, in any
environment: one position drawn in each of SAMPLE equal strata by integer arithmetic
(splitmix64), never by a random generator whose stream could change.
A tensor of at most SAMPLE elements is sampled whole: its digest holds every value.

docs/FORMAT.md describes how a step's digests are stored; comparison/digests.py compares
them. numpy only; Python 3.7 syntax (the recorder computes digests).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..errors import CorruptTrace

SAMPLE = 1000
RULE = "stratified-splitmix64/1"  # how positions are chosen: a digest says which rule made it
# Statistics are made in float64 over blocks of this many elements, which stay in cache, in one
# pass over the tensor (24M float32 elements: 52 ms, against 73 ms for a pass per min, max and
# finiteness check beside the blocks, and 10 ms for numpy's one float32 sum).
BLOCK = 1 << 16
_SEED = np.uint64(0x9E3779B97F4A7C15)


def digestible(value: Any) -> bool:
    """A numeric array or scalar (bool, int, uint, float, bfloat16 and the like): digests are
    kept of these; anything else (strings, structures, complex) stays whole."""
    if not isinstance(value, (np.ndarray, np.generic)):
        return False
    kind = value.dtype.kind
    return kind in "biuf" or (kind == "V" and value.dtype.fields is None and "float" in value.dtype.name)


def positions(count: int, sample: int = SAMPLE) -> np.ndarray:
    """The flat positions a digest of `count` elements samples, in increasing order."""
    if count <= sample:
        return np.arange(count, dtype=np.int64)
    i = np.arange(sample, dtype=np.uint64)
    n = np.uint64(count)
    low = i * n // np.uint64(sample)
    width = (i + np.uint64(1)) * n // np.uint64(sample) - low  # >= 1: count > sample
    return (low + _splitmix64(i ^ _SEED) % width).astype(np.int64)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


@dataclass(frozen=True)
class Digest:
    """What a golden keeps of one tensor at one step instead of its values (see the module)."""

    shape: Tuple[int, ...]
    dtype: str  # numpy's dtype name ("float32", "bfloat16", "int64", ...)
    count: int
    sum: float
    sumsq: float
    sumabs: float  # nan: not made (a digest made in the graph)
    min: float  # over finite elements; nan when there are none
    max: float
    maxabs: float
    nan: int
    inf: int
    crc: Optional[int]  # crc32 of the tensor's bytes (None: not computed, see `digest`)
    sample: np.ndarray  # the values at positions(count), flat, in the tensor's dtype
    # Relative bound on the round-off of the sums: |error of sum| <= roundoff * sum|x| and
    # |error of sumsq| <= roundoff * sumsq. 0: summed in float64 here (a comparison's own slack).
    roundoff: float = 0.0

    @property
    def nonfinite(self) -> int:
        return self.nan + self.inf

    @property
    def whole(self) -> bool:
        """The sample is every element: the digest holds the whole tensor."""
        return self.sample.size == self.count

    @property
    def norm(self) -> float:
        return float(np.sqrt(self.sumsq))

    @property
    def l1(self) -> float:
        """The sum of |x|, or where the digest has none its bound sqrt(n) * norm (Cauchy-Schwarz;
        the sum of squares widened by its stated round-off)."""
        if not np.isnan(self.sumabs):
            return self.sumabs
        return float(np.sqrt(float(self.count - self.nonfinite) * self.sumsq * (1 + self.roundoff)))

    def positions(self) -> np.ndarray:
        return positions(self.count)

    def index_of(self, sample_index: int) -> Tuple[int, ...]:
        """The tensor index of the sample's `sample_index`-th element."""
        flat = int(self.positions()[sample_index])
        return tuple(int(i) for i in np.unravel_index(flat, self.shape)) if self.shape else ()

    def at(self, index: Optional[Tuple[int, ...]]) -> Optional[float]:
        """The element at a tensor index, if the sample holds it (else None)."""
        if index is None or len(index) != len(self.shape):
            return None
        flat = int(np.ravel_multi_index(index, self.shape)) if self.shape else 0
        sampled = self.positions()
        where = int(np.searchsorted(sampled, flat))
        return self.sample[where].item() if where < sampled.size and int(sampled[where]) == flat else None

    def value(self) -> np.ndarray:
        """The tensor itself, when the digest holds it whole."""
        if not self.whole:
            raise ValueError("a digest of %d elements keeps only %d of them" % (self.count, self.sample.size))
        return self.sample.reshape(self.shape)

    def to_wire(self) -> Dict[str, Any]:
        wire = {"shape": list(self.shape), "dtype": self.dtype, "n": self.count,
                "stats": [self.sum, self.sumsq, self.sumabs, self.min, self.max, self.maxabs],
                "nan": self.nan, "inf": self.inf, "crc": self.crc, "sample": self.sample.tobytes()}
        if self.roundoff:
            wire["roundoff"] = self.roundoff
        return wire

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any], dtype_of: Any) -> "Digest":
        """From to_wire's map; `dtype_of(name)` gives the numpy dtype of a dtype name (bfloat16
        needs ml_dtypes). ValueError if the map is not a digest's."""
        try:
            shape = tuple(int(x) for x in wire["shape"])
            dtype = dtype_of(str(wire["dtype"]))
            count = int(wire["n"])
            stats = [float(x) for x in wire["stats"]]
            sample = np.frombuffer(bytes(wire["sample"]), dtype=dtype)
            nan, inf = int(wire["nan"]), int(wire["inf"])
            crc = None if wire["crc"] is None else int(wire["crc"])
            roundoff = float(wire.get("roundoff", 0.0))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError("a digest entry does not decode (%s)" % (exc,)) from None
        if len(stats) != 6 or count != int(np.prod(shape, dtype=np.int64)) or \
                sample.size != min(count, SAMPLE) or min(nan, inf, count) < 0 or not 0 <= roundoff < 1:
            raise ValueError("a digest entry is inconsistent (shape %s, %d elements, %d sampled)"
                             % (shape, count, sample.size))
        return cls(shape, np.dtype(dtype).name, count, *stats, nan, inf, crc, sample, roundoff)


def digest(value: Any, crc: bool = True, crc_if: Optional[np.ndarray] = None) -> Digest:
    """The digest of a numeric array or scalar (see `digestible`). crc=False leaves the crc32
    out (40% of the time): a comparison that already knows the bytes differ needs none;
    `crc_if` (another digest's sample) keeps it only where this sample's bytes equal those."""
    array = np.asarray(value)
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)  # which, unlike asarray, makes a scalar one-dimensional
    flat = array.reshape(-1)
    count = int(flat.size)
    data = flat.astype(np.float32) if array.dtype.kind == "V" else flat  # bfloat16 and the like
    nan = inf = 0
    stats = _statistics(data)
    if data.dtype.kind == "f" and not np.isfinite(stats[0]):  # a NaN or an Inf: counted, then left out
        finite = np.isfinite(data)
        nan = int(np.isnan(data).sum())
        inf = count - int(finite.sum()) - nan
        if nan or inf:
            stats = _statistics(data[finite])
    total, squares, absolute, low, high = stats
    maxabs = max(abs(low), abs(high)) if data.size - nan - inf else float("nan")
    sample = flat[positions(count)].copy()
    if crc_if is not None:  # could the bytes be equal? Only if the sampled ones are
        crc = crc and sample.dtype == crc_if.dtype and np.array_equal(sample.view(np.uint8), crc_if.view(np.uint8))
    checksum = zlib.crc32(memoryview(flat.view(np.uint8))) & 0xFFFFFFFF if crc else None
    return Digest(tuple(int(x) for x in array.shape), array.dtype.name, count, total, squares, absolute, low, high,
                  maxabs, nan, inf, checksum, sample)


def from_statistics(shape: Tuple[int, ...], dtype: str, stats: Any, sample: Any, roundoff: float) -> Digest:
    """A digest of statistics made elsewhere (record/graph_digests.py): `stats` is (sum, sumsq,
    min, max, NaN count, Inf count) over the finite elements, min and max inf and -inf where
    there are none; no sum of |x| and no crc32."""
    total, squares, low, high, nan, inf = (float(x) for x in stats)
    count = int(np.prod(shape, dtype=np.int64))
    if not count - int(nan) - int(inf):
        low = high = float("nan")
    maxabs = max(abs(low), abs(high)) if not np.isnan(low) else float("nan")
    sample = np.ascontiguousarray(sample).reshape(-1)
    if sample.size != min(count, SAMPLE):
        raise ValueError("a sample of %d elements for a tensor of %d" % (sample.size, count))
    return Digest(tuple(int(x) for x in shape), dtype, count, total, squares, float("nan"), low, high, maxabs,
                  int(nan), int(inf), None, sample, roundoff)


def recorded(value: Any) -> Digest:
    """The digest a recording keeps between keyframes: with no crc32 of a float tensor, whose
    bytes no port computed elsewhere repeats (integers keep theirs: they compare exactly)."""
    return digest(value, crc=np.asarray(value).dtype.kind not in "fV")


def _statistics(data: np.ndarray) -> Tuple[float, float, float, float, float]:
    """(sum, sum of squares, sum of |x|, min, max) of flat numeric `data` in float64, in one pass:
    each block widened once, in cache, and every statistic made of it there (min and max nan
    when empty; the sums not finite where an element is not)."""
    total = squares = absolute = 0.0
    low, high = float("inf"), float("-inf")
    wide = np.empty(min(BLOCK, data.size))  # reused: no allocation a block
    for start in range(0, data.size, BLOCK):
        piece = data[start:start + BLOCK]
        block = wide[:piece.size]
        np.copyto(block, piece, casting="unsafe")
        total += float(block.sum())
        squares += float(np.dot(block, block))
        low, high = min(low, float(block.min())), max(high, float(block.max()))
        absolute += float(np.abs(block, out=block).sum())
    if not data.size:
        low = high = float("nan")
    return total, squares, absolute, low, high


def pack(digests: List[Tuple[str, Digest]]) -> List[Dict[str, Any]]:
    """A step's digests as plain data (msgpack): [{"key": ..., **digest}], in recording order."""
    return [dict(d.to_wire(), key=key) for key, d in digests]


def described(entries: Any) -> List[Tuple[str, str, Tuple[int, ...], str]]:
    """(kind, name, shape, dtype) of each digest in pack's output, for a catalog (no sample is
    decoded); entries that are not a digest's are left out (a reader of the step says why)."""
    out = []
    for entry in entries if isinstance(entries, list) else []:
        try:
            kind, _, name = str(entry["key"]).partition("/")
            out.append((kind, name, tuple(int(x) for x in entry["shape"]), str(entry["dtype"])))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def unpack(entries: Any, dtype_of: Any, where: str) -> Dict[str, Digest]:
    """pack's output read back; CorruptTrace naming `where` if it is not."""
    if not isinstance(entries, list):
        raise CorruptTrace("%s: the step's digests are not a list" % where)
    out: Dict[str, Digest] = {}
    for entry in entries:
        key: Optional[str] = entry.get("key") if isinstance(entry, dict) else None
        if not isinstance(key, str):
            raise CorruptTrace("%s: a digest without a tensor key" % where)
        try:
            out[key] = Digest.from_wire(entry, dtype_of)
        except ValueError as exc:
            raise CorruptTrace("%s, digest of %s: %s" % (where, key, exc)) from None
    return out
