"""The attributes a recorder replaces while it is active (optimizer methods, tf.gradients,
an iterator's get_next, ...): replaced once however many recorders nest, restored by the last
one to leave. A replacement notes what it sees and never breaks the call it wraps. Python 3.7
syntax."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Iterable, List, Tuple

# (owner, attribute name, make: the original -> its replacement)
Target = Tuple[Any, str, Callable[[Callable[..., Any]], Callable[..., Any]]]


class Patches:
    def __init__(self, targets: Callable[[Any], Iterable[Target]]) -> None:
        self._targets = targets  # tf -> what to replace
        self._saved: List[Tuple[Any, str, Any]] = []
        self._depth = 0

    def install(self, tf: Any) -> None:
        self._depth += 1
        if self._depth > 1:
            return
        for owner, name, make in self._targets(tf):
            # a class's method is replaced where it is defined, not on a subclass that inherits it
            original = vars(owner).get(name) if inspect.isclass(owner) else getattr(owner, name, None)
            if original is not None:
                self._saved.append((owner, name, original))
                setattr(owner, name, make(original))

    def uninstall(self) -> None:
        self._depth = max(0, self._depth - 1)
        if self._depth:
            return
        while self._saved:
            owner, name, original = self._saved.pop()
            setattr(owner, name, original)


def noting(original: Callable[..., Any], note: Callable[[tuple, dict, Any], None]) -> Callable[..., Any]:
    """`original`, which then hands note(args, kwargs, result) what it was called with and gave."""
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        try:
            note(args, kwargs, result)
        except Exception:  # noting must never break the user's graph construction
            pass
        return result
    return wrapper
