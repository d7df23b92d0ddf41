"""Attributes of TensorFlow's, Keras' and the port's classes and modules replaced while a replay
step runs (the optimizers' hooks, the random tape, the source lines), and put back after,
whatever happens."""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator, List, Tuple


@contextlib.contextmanager
def patched(replacements: Iterable[Tuple[Any, str, Any]]) -> Iterator[None]:
    """Each (owner, attribute, replacement) set for the context's length, the originals put back
    in reverse order. An owner's own attribute is what is saved (a class's staticmethod stays one)."""
    saved: List[Tuple[Any, str, Any]] = []
    try:
        for owner, name, replacement in replacements:
            own = vars(owner)
            saved.append((owner, name, own[name] if name in own else getattr(owner, name)))
            setattr(owner, name, replacement)
        yield
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)
