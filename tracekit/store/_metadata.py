"""msgpack encoding of metadata: plain data only, decoded with limits, never code."""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from ..errors import UnsupportedValue

# Far beyond any real golden's metadata (a catalog of 100,000 tensors is ~15 MB), and small enough
# that decoding a hostile one stays within a few hundred MB.
MAX_META_BYTES = 64 << 20


def _default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray) and obj.size <= 4096 and obj.dtype.kind in "biuf":
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise UnsupportedValue(
        "metadata must be plain data (dict, list, str, bytes, numbers, bool, None), "
        "got %s: %r" % (type(obj).__name__, obj)
    )


def pack(obj: Any) -> bytes:
    data = msgpack.packb(obj, default=_default, use_bin_type=True, strict_types=False)
    if len(data) > MAX_META_BYTES:  # a reader would refuse it
        raise UnsupportedValue("metadata of %d bytes exceeds the %d-byte limit: record large data as tensors"
                               % (len(data), MAX_META_BYTES))
    return data


def _no_ext(code: int, data: bytes) -> Any:
    raise ValueError("msgpack extension type %d is not allowed in tracekit metadata" % code)


def unpack(data: bytes) -> Any:
    """Decode metadata; raises ValueError on anything malformed (the caller names the file)."""
    if len(data) > MAX_META_BYTES:
        raise ValueError("metadata of %d bytes exceeds the %d-byte limit" % (len(data), MAX_META_BYTES))
    try:
        # unpackb bounds every string/array/map length by len(data) on its own.
        return msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=False, ext_hook=_no_ext)
    except ValueError:
        raise
    except Exception as exc:  # msgpack raises several unrelated types on bad input
        raise ValueError("malformed metadata (%s: %s)" % (type(exc).__name__, exc))


def unpacker(data: bytes) -> "msgpack.Unpacker":
    """A streaming reader of one blob, with `unpack`'s limits and refusals: its caller can read
    a collection's declared length (read_array_header) before decoding its items, for a hostile
    blob of a few MB can decode into hundreds of MB of Python objects."""
    stream = msgpack.Unpacker(raw=False, use_list=True, strict_map_key=False, ext_hook=_no_ext,
                              max_buffer_size=max(len(data), 1))
    stream.feed(data)
    return stream
