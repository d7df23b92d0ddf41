"""Where the recorder meets the session: the methods every path to a TF1 session goes through
(`run`; `_make_callable_from_options`, TF1 Keras `fit`'s; `make_callable`), wrapped on one
session (Patches.session) or on the session class, for every session (attach_all: the zero-code
mode), until detach(). A wrapped call asks the recorder (Steps) whether it is a training step,
and lets it record the step; every other call passes through untouched."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

from ..errors import UsageError
from .graph import StepPlan
from .sessions import raw_session

Wrapper = Callable[[Callable[..., Any]], Callable[..., Any]]


if TYPE_CHECKING:  # typing.Protocol is Python 3.8's; the recorder runs on 3.7
    from typing import Protocol

    class Steps(Protocol):
        """What the wrapped session methods ask of the recorder (recorder.Recorder)."""

        done: bool  # the recording is over: every call passes through

        def busy(self) -> bool:
            """This thread is inside a step the recorder runs (its own runs pass through)."""

        def plan_run(self, sess: Any, fetches: Any, feed_dict: Any) -> Optional[StepPlan]:
            """The training step a run is, or None."""

        def record_run(self, sess: Any, run: Callable[..., Any], plan: StepPlan, fetches: Any, feed_dict: Any,
                       options: Any, run_metadata: Any) -> Any:
            """Run and record the step; the values of the caller's fetches."""

        def record_callable(self, sess: Any, make: Callable[..., Any], options: Any) -> Any:
            """The callable `make(sess, options)` would return, its steps recorded."""


class Patches:
    """The session methods wrapped for one recorder, and how to undo it."""

    def __init__(self, steps: "Steps") -> None:
        self._steps = steps
        self._attached: List[Tuple[Any, str]] = []  # (session, method) wrapped on that session
        self._global: List[Tuple[Any, str, Any]] = []  # (class, method, original) wrapped on the class

    def session(self, sess: Any) -> Any:
        """Wrap the methods of `sess` (a Session, or a MonitoredSession's raw session); `sess`."""
        raw = raw_session(sess)
        if raw is None:
            raise UsageError("rec.session() needs a tf.compat.v1.Session or MonitoredSession, got %s"
                             % type(sess).__name__)
        for name, make in self._wrappers():
            if name not in vars(raw):
                setattr(raw, name, make(getattr(type(raw), name)).__get__(raw))
                self._attached.append((raw, name))
        return sess

    def attach_all(self, base_session: Any) -> None:
        """Wrap the methods of `base_session` (TF's BaseSession): every session's."""
        for name, make in self._wrappers():
            original = base_session.__dict__[name]
            self._global.append((base_session, name, original))
            setattr(base_session, name, make(original))

    def detach(self) -> None:
        while self._attached:
            raw, name = self._attached.pop()
            try:
                delattr(raw, name)
            except AttributeError:
                pass
        while self._global:
            cls, name, original = self._global.pop()
            setattr(cls, name, original)

    def _wrappers(self) -> List[Tuple[str, Wrapper]]:
        return [("run", self._run), ("_make_callable_from_options", self._callable),
                ("make_callable", self._make_callable)]

    def _run(self, original: Callable[..., Any]) -> Callable[..., Any]:
        steps = self._steps

        @functools.wraps(original)
        def run(sess: Any, fetches: Any, feed_dict: Any = None, options: Any = None, run_metadata: Any = None) -> Any:
            plan = steps.plan_run(sess, fetches, feed_dict)
            if plan is None:
                return original(sess, fetches, feed_dict, options, run_metadata)
            return steps.record_run(sess, original, plan, fetches, feed_dict, options, run_metadata)
        return run

    def _make_callable(self, original: Callable[..., Any]) -> Callable[..., Any]:
        steps = self._steps

        @functools.wraps(original)
        def make_callable(sess: Any, fetches: Any, feed_list: Any = None, accept_options: bool = False) -> Any:
            if steps.done or steps.busy():
                return original(sess, fetches, feed_list, accept_options)
            # Route through run(), which the recorder sees (TF's own fast path bypasses it).
            feeds = list(feed_list or [])

            def call(*args: Any, **kwargs: Any) -> Any:
                return sess.run(fetches, feed_dict=dict(zip(feeds, args)) or None, **kwargs)
            return call
        return make_callable

    def _callable(self, original: Callable[..., Any]) -> Callable[..., Any]:
        steps = self._steps

        @functools.wraps(original)
        def make(sess: Any, callable_options: Any) -> Any:
            return steps.record_callable(sess, original, callable_options)
        return make
