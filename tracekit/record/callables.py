"""TF1 Keras `fit` reaches the session through callables (`_make_callable_from_options`),
not `run`: the callable a training step's options make becomes one that fetches what the step
records too (and, at the first step, the self-check's probes), and hands the step to the
recorder as `run` does. Python 3.7 syntax."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from .graph import StepPlan
from .witness import flat_probes, unflat_probes


class KerasCallable:
    """The callable of one kind of training step, recorded by `recorder` (recorder.Recorder: its
    full, fetches, step and base_run); `call` is what the program gets."""

    def __init__(self, recorder: Any, sess: Any, make: Callable[..., Any], options: Any,
                 plan: StepPlan) -> None:
        self._recorder = recorder
        self._sess = sess
        self._make = make
        self._options = options
        self._plan = plan
        self._count = len(options.fetch)  # the program's own fetches come first
        # (all tensors recorded, probes fetched) -> (the callable, how many probe tensors end its fetches)
        self._variants: Dict[Tuple[bool, bool], Tuple[Any, int]] = {}

    def _variant(self, full: bool, probes: Optional[List[Any]]) -> Tuple[Any, int]:
        key = (full, probes is not None)
        if key not in self._variants:
            probed = flat_probes(probes or [])
            extended = type(self._options)()
            extended.CopyFrom(self._options)
            recorded = self._recorder.fetches(self._plan, full, callable_=True).values()
            extended.fetch.extend([t.name for t in recorded] + [t.name for t in probed])
            self._variants[key] = (self._make(self._sess, extended), len(probed))
        return self._variants[key]

    def call(self, *args: Any, **kwargs: Any) -> Any:
        recorder, count = self._recorder, self._count
        if recorder.done:
            return self._variant(False, None)[0](*args, **kwargs)[:count]

        def execute(extra: Any, probes: Any) -> Tuple[Any, List[Tuple[str, Any]], List[Any], List[Any]]:
            fn, probed = self._variant(recorder.full(), probes)
            out = fn(*args, **kwargs)
            end = len(out) - probed
            return out[:count], list(zip(self._options.feed, args)), out[count:end], unflat_probes(probes or [],
                                                                                                 out[end:])
        return recorder.step(self._sess, recorder.base_run, self._plan, execute, callable_=True)
