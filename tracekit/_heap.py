"""Freed memory given back to the system. glibc's malloc keeps what a large computation freed
(TensorFlow's buffers of a closed session, numpy's arrays) in its heap for reuse, so a process
that once held a model's state several times over keeps that resident after it let the copies
go; `malloc_trim` returns the free pages. Elsewhere (another libc, macOS, Windows) it does
nothing. Python 3.7 syntax (the recorder calls it)."""

import ctypes
import ctypes.util
import gc
from typing import Any, Optional

_LIBC: Optional[Any] = None


def give_back() -> bool:
    """Collect Python's garbage, then return the C heap's free pages to the system; whether
    there was a glibc to ask."""
    global _LIBC
    gc.collect()
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _LIBC.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _LIBC = False
    if not _LIBC:
        return False
    _LIBC.malloc_trim(0)
    return True
