"""The port's lines behind what a replay compares (tracekit/sources.py): where each tap was
taken, where the loss was differentiated, where each mapped variable was assigned.

Taken in a step's first run of its kind only (a tf.function is traced then). Inside a
tf.function, AutoGraph runs converted copies of the port's functions; TensorFlow's own stack
extraction maps those frames back to the port's file and line, so it is used where it exists.
"""

from __future__ import annotations

import contextlib
import traceback
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..keys import make_key
from ..replay.patched import patched
from ..sources import Lines, Source, user_source, written
from .tf_import import tf

try:  # maps AutoGraph's generated frames to the port's source (TensorFlow's private module)
    from tensorflow.python.util import tf_stack as _tf_stack
except ImportError:  # pragma: no cover - another TensorFlow layout: the plain stack, unmapped
    _tf_stack = None

ASSIGNS = ("assign", "assign_add", "assign_sub")


def stack_source() -> Optional[Source]:
    """The port's innermost line on the current stack."""
    try:
        frames = _tf_stack.extract_stack() if _tf_stack is not None else traceback.extract_stack()
    except Exception:  # a private API that moved: the plain stack
        frames = traceback.extract_stack()
    return user_source(frames, called=True)


def tensor_source(tensor: Any) -> Optional[Source]:
    """Where a tensor's op was made (a graph tensor, a tf.function's), else the current line."""
    op = None if tf.executing_eagerly() else getattr(tensor, "op", None)
    try:
        found = user_source(op.traceback, called=True) if op is not None else None
    except Exception:  # an op without a traceback
        found = None
    return found or stack_source()


class SourceWatch:
    """The lines of one replay. `golden_names(variable)`: the golden's names of a port variable
    it assigns (a mapped one's, or a converted one's golden variables), [] for others;
    `variables`: those port variables (their classes' assign methods are watched)."""

    def __init__(self, golden_names: Callable[[Any], Sequence[str]], variables: Sequence[Any]) -> None:
        self._golden_names = golden_names
        self._variables = list(variables)
        self.lines: Dict[str, Lines] = {}
        self._wrappers: Optional[List[Tuple[Any, str, Any]]] = None

    def meta(self) -> Dict[str, Any]:
        return written(self.lines)

    @tf.autograph.experimental.do_not_convert
    def tap(self, name: str, tensor: Any) -> None:
        key = make_key("tap", name)
        if key not in self.lines:
            found = tensor_source(tensor)
            if found is not None:
                self.lines[key] = Lines(found)

    @tf.autograph.experimental.do_not_convert
    def differentiated(self, target: Any) -> None:
        """A gradient call's target: where the port made its loss (a graph's), else where it is
        differentiated. The first only: a port with several losses names them in a dict."""
        if make_key("loss", "loss") not in self.lines:
            found = tensor_source(target)
            if found is not None:
                self.lines[make_key("loss", "loss")] = Lines(found)

    @tf.autograph.experimental.do_not_convert
    def applied(self, variables: Sequence[Any], rate: Optional[str] = None) -> None:
        """An optimizer's apply_gradients: the port's line that updates these variables (a
        Keras optimizer's kernels assign no variable the port sees), and applies its learning
        rate (`rate`, its golden key)."""
        names = [n for v in variables for n in self._golden_names(v) if make_key("var", n) not in self.lines]
        wanted = rate is not None and rate not in self.lines
        found = stack_source() if names or wanted else None
        if found is not None:
            self.lines.update((make_key("var", n), Lines(update=(found,))) for n in names)
            if wanted:
                self.lines[rate] = Lines(found)  # type: ignore[index]

    @contextlib.contextmanager
    def installed(self, first: bool) -> Iterator[None]:
        """While open (in a step's first run of its kind), variables' assigns say where they are."""
        if not first:
            yield
            return
        if self._wrappers is None:
            self._wrappers = [(cls, name, self._assign(vars(cls)[name])) for cls, name in _assigns(self._variables)]
        with patched(self._wrappers):
            yield

    def _assign(self, original: Callable[..., Any]) -> Callable[..., Any]:
        watch = self

        @tf.autograph.experimental.do_not_convert
        def assign(variable: Any, *args: Any, **kwargs: Any) -> Any:
            watch.applied([variable])
            return original(variable, *args, **kwargs)
        return assign


def _assigns(variables: Sequence[Any]) -> List[Tuple[Any, str]]:
    """(class, method) of the assign methods the variables' classes resolve to (each defined
    once: a tf.Variable's in ResourceVariable, a Keras 3 variable's in its own class)."""
    out: List[Tuple[Any, str]] = []
    for cls in {type(v) for v in variables}:
        for name in ASSIGNS:
            owner = next((c for c in cls.__mro__ if name in vars(c)), None)
            if owner is not None and (owner, name) not in out:
                out.append((owner, name))
    return out
