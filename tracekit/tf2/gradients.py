"""Gradients where the port takes them, whichever optimizer applies them.

A Keras optimizer's apply_gradients says what it applied (optimizer.py). A hand-written
optimizer (a tf.Module updating its variables with assign ops) says nothing, so during a step
`tf.GradientTape.gradient` (which Keras optimizers' compute_gradients call too), `tf.gradients`
and a `tf.compat.v1.train` optimizer's compute_gradients report the gradients they return of the
mapped variables, and `tf.clip_by_global_norm` what it made of them. After the step, a variable whose
gradient no optimizer reported gets the one its gradient call returned: clipped where the port
clipped it, with the unclipped one beside it where the golden holds both.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np

from ..keys import MICRO, SPARSE_INDICES, SPARSE_VALUES, UNCLIPPED, make_key, sparse_owner, split_key
from .capture import Capture
from .distribute import replica_id
from .tf_import import tf

_TAKEN = "#taken:"  # capture names until the step ends: "grad/#taken:<name>", "grad/#clipped:<name>"
_CLIPPED = "#clipped:"
_CALL = "#call%d:"  # each gradient call's, where the golden holds each micro-batch's ("grad/#call2:<name>")


def gradient_keys(name: str, grad: Any, sparse: bool) -> List[Tuple[str, Any]]:
    """("grad/<name>", tensor) pairs of one gradient: kept as rows and indices where the golden
    holds it so (an IndexedSlices; the comparison sums each index's rows), else dense."""
    if isinstance(grad, tf.IndexedSlices) and sparse:
        return [(make_key("grad", name + SPARSE_VALUES), grad.values),
                (make_key("grad", name + SPARSE_INDICES), grad.indices)]
    return [(make_key("grad", name), tf.convert_to_tensor(grad))]


class GradientWatch:
    """The gradient calls and clipping of one replay's steps. `name_of(variable)`: the golden's
    name for a mapped variable (or a converted one's capture name), else None."""

    def __init__(self, capture: Capture, name_of: Callable[[Any], Optional[str]], sparse: Set[str],
                 micro: Set[str] = frozenset(), unclipped: Set[str] = frozenset()) -> None:
        self.capture = capture
        self._name_of = name_of
        self._sparse = sparse
        self._unclipped = unclipped  # variables whose gradient the golden holds before clipping too
        self._micro = micro  # variables whose gradient the golden holds per micro-batch ("<name>@micro")
        self._calls: Dict[str, int] = {}  # variable -> gradient calls that took it in this step (or trace)
        self.before_clip: Dict[int, Any] = {}  # id(a clip_by_global_norm output) -> its input, this step
        self._taken: Dict[int, Tuple[Any, str]] = {}  # id(a gradient returned this step) -> (it, its variable)
        self.seen = False  # a gradient call returned a mapped variable's gradient (in some step)
        # A drift replay's move of every gradient taken (perturb.GradientJitter), else None.
        self.jitter: Optional[Callable[[List[Any]], List[Any]]] = None
        # Whether what gradient calls return must be kept: True once an optimizer did not report a
        # gradient they took (a hand-written one), False after a step whose optimizers reported all
        # (a Keras port: not copied twice), None until the first step of each kind has told.
        self.needed: Optional[bool] = None
        # Told each gradient call's target (the loss): where the port made it (tf2/sources.py).
        self.differentiated: Optional[Callable[[Any], None]] = None

    def start(self, first: bool) -> None:
        """A step begins; `first`: the first of its kind (its function may be traced now)."""
        self.before_clip.clear()
        self._taken.clear()
        self._calls.clear()
        if first and self.needed is False:
            self.needed = None

    def _wanted(self) -> bool:
        return self.needed is not False

    def wrappers(self) -> List[Tuple[Any, str, Any]]:
        """(owner, attribute, replacement) for the step's length."""
        v1 = tf.compat.v1.train.Optimizer
        out: List[Tuple[Any, str, Any]] = [(tf.GradientTape, "gradient", self._tape(vars(tf.GradientTape)["gradient"])),
                                           (v1, "compute_gradients", self._compute(vars(v1)["compute_gradients"]))]
        for module in {id(m): m for m in (tf, tf.compat.v1)}.values():
            for name, wrap in (("gradients", self._gradients), ("clip_by_global_norm", self._clip)):
                if name in vars(module):
                    out.append((module, name, wrap(vars(module)[name])))
        return out

    def _tape(self, original: Callable[..., Any]) -> Callable[..., Any]:
        watch = self

        def gradient(tape: Any, target: Any, sources: Any, *args: Any, **kwargs: Any) -> Any:
            watch._target(target)
            result = watch._moved(original(tape, target, sources, *args, **kwargs))
            watch._took(tf.nest.flatten(sources), tf.nest.flatten(result, expand_composites=False))
            return result
        return gradient

    def _gradients(self, original: Callable[..., Any]) -> Callable[..., Any]:
        watch = self

        def gradients(ys: Any, xs: Any, *args: Any, **kwargs: Any) -> Any:
            watch._target(ys)
            result = watch._moved(original(ys, xs, *args, **kwargs))
            watch._took(tf.nest.flatten(xs), list(result))
            return result
        return gradients

    def _compute(self, original: Callable[..., Any]) -> Callable[..., Any]:
        watch = self

        def compute_gradients(optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            pairs = original(optimizer, *args, **kwargs)
            pairs = list(zip(watch._moved([g for g, _ in pairs]), [v for _, v in pairs]))
            watch._took([v for _, v in pairs], [g for g, _ in pairs])
            return pairs
        return compute_gradients

    def _clip(self, original: Callable[..., Any]) -> Callable[..., Any]:
        watch = self

        def clip_by_global_norm(t_list: Any, *args: Any, **kwargs: Any) -> Any:
            given = list(t_list)
            clipped, norm = original(given, *args, **kwargs)
            watch.before_clip.update((id(after), before) for before, after in zip(given, clipped) if after is not None)
            named = []
            for before, after in zip(given, clipped):
                taken = watch._taken.get(id(before))
                if taken is not None and after is not None:
                    named += gradient_keys(_CLIPPED + taken[1], after, taken[1] in watch._sparse)
            watch.capture.put_many(named, wanted=watch._wanted, becomes=watch._becomes(named))
            return clipped, norm
        return clip_by_global_norm

    @tf.autograph.experimental.do_not_convert
    def _target(self, target: Any) -> None:
        if self.differentiated is not None and replica_id() is None:
            flat = tf.nest.flatten(target)
            if len(flat) == 1:  # one loss; a list of targets says nothing of which is "the" loss
                self.differentiated(flat[0])

    @tf.autograph.experimental.do_not_convert
    def _moved(self, result: Any) -> Any:
        """The gradients a call returned, moved by the drift replay's jitter where there is one."""
        if self.jitter is None:
            return result
        flat = tf.nest.flatten(result, expand_composites=False)
        return tf.nest.pack_sequence_as(result, self.jitter(flat), expand_composites=False)

    @tf.autograph.experimental.do_not_convert
    def _took(self, sources: List[Any], grads: List[Any]) -> None:
        if replica_id() is not None:  # under a strategy the optimizer's all-reduced gradients are the ones
            return
        named, calls = [], []
        for source, grad in zip(sources, grads):
            name = self._name_of(source) if grad is not None else None
            if name is None:
                continue
            self._taken[id(grad)] = (grad, name)
            named += gradient_keys(_TAKEN + name, grad, name in self._sparse)
            if name in self._micro:  # each call's: one per micro-batch, where the port loops over them
                call = self._calls[name] = self._calls.get(name, -1) + 1
                calls.append((make_key("grad", _CALL % call + name), tf.convert_to_tensor(grad)))
        if named:
            self.seen = True
            self.capture.put_many(named, wanted=self._wanted, becomes=self._becomes(named))
        if calls:  # compared whichever optimizer applies their sum
            self.capture.put_many(calls, wanted=lambda: True)

    def _becomes(self, named: List[Tuple[str, Any]]) -> Dict[str, Tuple[str, ...]]:
        """The golden keys each captured "#taken:"/"#clipped:" key may become in resolve(): its
        own, and "<name>@unclipped" for one taken before clipping where the golden holds that.
        A converted variable's ("#conversion..."): none, it is converted from its value."""
        out: Dict[str, Tuple[str, ...]] = {}
        for key, _ in named:
            marked = split_key(key)[1]
            marker = _TAKEN if marked.startswith(_TAKEN) else _CLIPPED
            name = marked[len(marker):]
            if name.startswith("#"):
                continue
            keys = [make_key("grad", name)]
            if marker == _TAKEN and name in self._unclipped:
                keys.append(make_key("grad", name + UNCLIPPED))
            out[key] = tuple(keys)
        return out

    def resolve(self, values: Dict[str, np.ndarray], unclipped: Set[str], seen: Set[str]) -> None:
        """After a step: each gradient a gradient call took, where no optimizer reported that
        variable's, under its golden key (the clipped one where the port clipped it, the one
        before clipping as "<name>@unclipped" where the golden holds that: `unclipped`; those
        are added to `seen`)."""
        calls: Dict[str, Dict[int, np.ndarray]] = {}
        for key in [k for k in values if split_key(k)[1].startswith("#call")]:
            index, name = split_key(key)[1][len("#call"):].split(":", 1)
            calls.setdefault(name, {})[int(index)] = values.pop(key)
        for name, by_call in calls.items():  # one per micro-batch, stacked as the golden holds them
            ordered = [by_call[i] for i in sorted(by_call)]
            if len({np.shape(v) for v in ordered}) == 1:
                values[make_key("grad", name + MICRO)] = np.stack(ordered)
        taken: Dict[str, Dict[str, np.ndarray]] = {}
        for key in [k for k in values if split_key(k)[1].startswith((_TAKEN, _CLIPPED))]:
            name = split_key(key)[1]
            marker = _TAKEN if name.startswith(_TAKEN) else _CLIPPED
            taken.setdefault(marker, {})[name[len(marker):]] = values.pop(key)
        raw, clipped = taken.get(_TAKEN, {}), taken.get(_CLIPPED, {})
        reported = {_owner(split_key(k)[1]) for k in values if split_key(k)[0] == "grad"}
        own = [name for name in raw if _owner(name) not in reported]
        if own:
            self.needed = True
        elif self.needed is None and raw:
            self.needed = False
        for name in own:
            owner = _owner(name)
            if name in clipped:
                values[make_key("grad", name)] = clipped[name]
                if owner in unclipped and owner in raw:  # a dense gradient: the golden holds those unclipped
                    values[make_key("grad", owner + UNCLIPPED)] = raw[owner]
                    seen.add(owner)
            else:
                values[make_key("grad", name)] = raw[name]


def _owner(name: str) -> str:
    """The variable a captured gradient name belongs to (a sparse one's parts, an unclipped one)."""
    name = name[:-len(UNCLIPPED)] if name.endswith(UNCLIPPED) else name
    return sparse_owner(name) or name
