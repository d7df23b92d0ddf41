"""The variables a recording keeps: which they are (the graph's global variables, known at the
first step), which runs between steps changed, and their values as a step needs them (the
initial state, the state after a step, what a step started from). Python 3.7 syntax."""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from ..keys import BEFORE

Read = List[Tuple[str, Any, Any]]  # ("var/<name>" or "slot/<name>", variable, value), in creation order


class RecordedState:
    def __init__(self) -> None:
        self.variables: Optional[List[Tuple[str, Any]]] = None  # (key, variable); None before the first step
        self._changed: set = set()  # variables runs between steps changed since the last step
        self._lock = threading.Lock()  # runs on other threads note changes while a step runs

    def begin(self, variables: List[Tuple[str, Any]]) -> None:
        self.variables = variables
        with self._lock:
            self._changed = set()  # the initial state is read now: what changed before is in it

    def note_changed(self, names: Iterable[str]) -> None:
        with self._lock:
            self._changed.update(names)

    def read(self, sess: Any, run: Callable[..., Any]) -> Read:
        """Every recorded variable's value now."""
        pairs = self.variables or []
        values = run(sess, [variable for _, variable in pairs]) if pairs else []
        return [(key, variable, value) for (key, variable), value in zip(pairs, values)]

    def by_name(self, sess: Any, run: Callable[..., Any]) -> Dict[str, Any]:
        """Every recorded variable's value now, by variable name."""
        return named(self.read(sess, run))

    def read_changed(self, sess: Any, run: Callable[..., Any]) -> List[Tuple[str, Any]]:
        """The recorded variables runs between the last step (or the initial state's read) and this
        one changed, as they are now ("kind/name@before" keys): what this step starts from."""
        with self._lock:
            changed, self._changed = self._changed, set()
        if not changed:
            return []
        read = [(key, variable) for key, variable in self.variables or [] if variable.name in changed]
        values = run(sess, [variable for _, variable in read]) if read else []
        return [(key + BEFORE, value) for (key, _), value in zip(read, values)]


def named(read: Read) -> Dict[str, Any]:
    """A read's values by variable name."""
    return {variable.name: value for _, variable, value in read}
