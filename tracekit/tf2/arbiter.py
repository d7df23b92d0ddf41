"""The float64 arbiter, TensorFlow's side: replay one step of a golden with the port built in
float64 and in float32, from the golden's state before the step, and look for the layers whose
decisions differ between the two (comparison/arbiter.py judges).

The port is rebuilt by its factory (make_port) under a float64 Keras dtype policy: its layers
hold and compute float64, the golden's state and inputs are cast up (exactly: every float32 is
a float64), its random draws are the golden's. What the port's own code creates in float32 (tf.one_hot,
tf.cast(x, tf.float32), tf.constant(1.0), tf.zeros, ...) is created in float64 while the float64
port is built and run (`float64_creations`, float64.py). A port that fixes float32 otherwise (a layer's
dtype=, an op of its own) cannot be arbitrated: the step is then undecided, naming the op.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from .. import taps
from ..comparison import golden_side
from ..comparison.arbiter import (EXPLAINED, PORT, Arbitration, Flip, TensorVerdict, arbiter_tolerance,
                                   forward_agrees, golden_before, judge, selection_flips, step_stats, undecided,
                                   zero_flips)
from ..comparison.downstream import by_update
from ..comparison.engine import compare_data as compare
from ..comparison.stats import Stats
from ..keys import make_key, split_key
from ..replay.options import ReplayOptions
from ..store import Trace
from ..store.excerpt import write_excerpt
from .float64 import cast_up, check_float64, float64_creations, float64_policy, why_mixed
from .tf_import import tf

# The tap names of the probe's layer outputs: "<PREFIX><index>" (and "#in" for a layer's input).
PREFIX = "tracekit.arbiter/"
SELECTING = ("MaxPool", "GlobalMaxPool")  # layer classes that choose one element of a window

# (excerpt path, model, step function, replay options, out) -> the actual trace of its one step
ReplayOne = Callable[[str, Any, Any, ReplayOptions, str], Trace]
# () -> a fresh port: (model, step function, its replay options)
MakePort = Callable[[], Tuple[Any, Any, ReplayOptions]]


def _layers(model: Any) -> List[Any]:
    flatten = getattr(model, "_flatten_layers", None)
    if flatten is not None:
        return [layer for layer in flatten(include_self=False) if type(layer).__name__ != "InputLayer"]
    return [m for m in getattr(model, "submodules", ()) if callable(getattr(m, "call", None))]


@dataclass
class _Probed:
    """One layer as the probe saw it: its name in the float32 model, whether it selects, and
    where its ReLU's pre-activation is: "activation" (its `activation` attribute is a ReLU, as a
    Dense's or Conv's relu), "input" (a ReLU layer: its input), or "" (no ReLU of its own)."""

    index: int
    name: str
    selecting: bool
    kink: str = ""


class Probe:
    """While installed, every layer of `model` taps its output (a selecting layer its input too,
    a layer with a ReLU its pre-activation, as "#z"), under PREFIX names numbered in the model's
    layer order: the same numbers in a float32 and a float64 build of one port. `flips`
    ({layer index: an array of -1, 0, +1 shaped as its pre-activation}) turns over the ReLU's
    decision where nonzero (`_turned`): the pre-activation is within round-off of the kink
    there, so its output moves by as little."""

    def __init__(self, model: Any, flips: Optional[Mapping[int, np.ndarray]] = None) -> None:
        self.layers = _layers(model) if model is not None else []
        self.probed = [_Probed(i, getattr(layer, "name", "?"), type(layer).__name__.startswith(SELECTING),
                               _kink(layer)) for i, layer in enumerate(self.layers)]
        self.flips = dict(flips or {})

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        activations = {}
        for layer, probed in zip(self.layers, self.probed):
            object.__setattr__(layer, "call", _tapping(layer.call, probed, self.flips))
            if probed.kink == "activation":
                activations[probed.index] = layer.activation
                object.__setattr__(layer, "activation", _kinked(layer.activation, probed, self.flips))
        try:
            yield
        finally:
            for layer in self.layers:
                with contextlib.suppress(AttributeError):
                    object.__delattr__(layer, "call")
            for index, activation in activations.items():
                object.__setattr__(self.layers[index], "activation", activation)


def _kink(layer: Any) -> str:
    activation = getattr(layer, "activation", None)
    if callable(activation) and getattr(activation, "__name__", "") == "relu":
        return "activation"
    plain = all(not getattr(layer, attr, None) for attr in ("max_value", "negative_slope", "threshold"))
    return "input" if type(layer).__name__ == "ReLU" and plain else ""


def _live(value: Any) -> bool:
    """A tensor of the step as it runs (eager, or in its tf.function), not of a symbolic build."""
    return tf.is_tensor(value) and not tf.is_symbolic_tensor(value) or _in_function(value)


def _turned(out: Any, z: Any, flip: Optional[np.ndarray]) -> Any:
    """`out` (a ReLU of `z`) with the decisions `flip` names turned over: where +1 (float64 cut
    it) the output is |z| and its derivative 1, where -1 the output is 0 and its derivative 0.
    The value moves by |z|, within round-off of the kink, which is what decides a max-pooling
    window of zeros: the golden's tiny positive element is the one its window chose."""
    if flip is None:
        return out
    up = tf.constant(flip > 0, dtype=z.dtype)
    down = tf.constant(flip < 0, dtype=z.dtype)
    through = z - tf.stop_gradient(z)  # 0, with derivative 1
    return out + up * (tf.stop_gradient(tf.abs(z) - out) + through) - down * (tf.stop_gradient(out) + through)


def _tapping(call: Callable[..., Any], probed: _Probed, flips: Mapping[int, np.ndarray]) -> Callable[..., Any]:
    name = "%s%d" % (PREFIX, probed.index)

    def tapped(*args: Any, **kwargs: Any) -> Any:
        out = call(*args, **kwargs)
        if _live(out):
            if probed.kink == "input" and args and tf.is_tensor(args[0]):
                taps.tap(name + "#z", args[0])
                out = _turned(out, args[0], flips.get(probed.index))
            taps.tap(name, out)
            if probed.selecting and args and tf.is_tensor(args[0]):
                taps.tap(name + "#in", args[0])
        return out
    return tapped


def _kinked(activation: Callable[..., Any], probed: _Probed, flips: Mapping[int, np.ndarray]) -> Callable[..., Any]:
    name = "%s%d#z" % (PREFIX, probed.index)

    def kinked(z: Any, *args: Any, **kwargs: Any) -> Any:
        out = activation(z, *args, **kwargs)
        if _live(out) and tf.is_tensor(z):
            taps.tap(name, z)
            out = _turned(out, z, flips.get(probed.index))
        return out
    kinked.__name__ = getattr(activation, "__name__", "relu")
    return kinked


def _in_function(value: Any) -> bool:
    graph = getattr(value, "graph", None)
    return graph is not None and any(cls.__name__ == "FuncGraph" for cls in type(graph).__mro__)


def arbitrate(golden: Trace, index: int, failing: Mapping[str, Stats], make_port: MakePort,
              replay_one: ReplayOne) -> Arbitration:
    """Judge step `index` of `golden`, whose float32 port fails there on `failing` (key -> stats)."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tracekit-arbiter-") as folder:
        excerpt = write_excerpt(golden, index, os.path.join(folder, "step.h5"))
        runs = _both(excerpt, folder, make_port, replay_one)
        if isinstance(runs, str):
            return undecided(index, runs, time.perf_counter() - start)
        g_step, before = golden.step(index), golden_before(golden, index)
        stats64, updated = by_update(golden.meta, before, g_step, runs.values, runs.stats,
                                     arbiter_tolerance())
        golden_flips = tuple(flip for flip in (zero_flips("golden tap %s" % name, g_step["tap", name],
                                                          runs.values[make_key("tap", name)])
                                               for name in g_step.names("tap")
                                               if make_key("tap", name) in runs.values)
                             if flip is not None)
        verdict = judge(index, failing, stats64, runs.flips, 0.0, golden_flips, by_update=updated)
        if verdict.verdict == PORT and forward_agrees(stats64):
            def float64_with(flips: Dict[int, np.ndarray]) -> "Tuple[Dict[str, Stats], Tuple[str, ...]] | None":
                ran = _float64(excerpt, folder, make_port, replay_one, flips)
                if isinstance(ran, str):
                    return None
                return by_update(golden.meta, before, g_step, ran.values, ran.stats, arbiter_tolerance())
            pre = ((p.index, p.name, runs.values.get(make_key("tap", "%s%d#z" % (PREFIX, p.index))))
                   for p in runs.probed if p.kink)
            found = golden_side.search(golden_side.near_kink(pre), stats64, float64_with)
            if found is not None:
                stats, updated, sides = found
                verdict = judge(index, failing, stats, runs.flips, 0.0, sides, reproduced=True, by_update=updated)
    return replace(verdict, seconds=time.perf_counter() - start)


def crossed(golden: Trace, own: Trace, index: int, make_port: MakePort, replay_one: ReplayOne) -> Arbitration:
    """Whether a discontinuity sent the port's own run (`own`, a replay of `golden` from the
    port's own state) away from the golden at step `index`: EXPLAINED when, from that run's
    state before the step, its float32 and float64 disagree (it crossed a kink itself), or when
    the float64 port decides differently from the run's state and from the golden's (a kink
    lies between the two trajectories; those flips are the evidence); else PORT."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tracekit-arbiter-") as folder:
        excerpt = write_excerpt(golden, index, os.path.join(folder, "own-step.h5"), source=own)
        runs = _both(excerpt, folder, make_port, replay_one, taps=True)
        if isinstance(runs, str):
            return undecided(index, runs, time.perf_counter() - start)
        flips, own64 = runs.flips, runs.values
        apart = tuple(TensorVerdict(key, 0.0, stats.ulps, False) for key, stats in sorted(runs.stats.items())
                      if not stats.ok)
        between: Tuple[Flip, ...] = ()
        if not apart and _whole_before(golden, index):
            at_golden = write_excerpt(golden, index, os.path.join(folder, "golden-step.h5"))
            between = _between(at_golden, own64, folder, make_port, replay_one)
    seconds = time.perf_counter() - start
    if apart or between:
        return Arbitration(index, EXPLAINED, flips=flips, also=apart, seconds=seconds, side="port" if apart else
                           "between", golden_flips=between)
    return Arbitration(index, PORT, seconds=seconds)


def _whole_before(golden: Trace, index: int) -> bool:
    """Whether the golden keeps its state whole before step `index` (a golden kept as keyframes
    does not between them: no kink between the trajectories can be sought there)."""
    before = golden.before(index)
    return before is not None and any(split_key(key)[0] == "var" for key in before)


def _between(excerpt: str, own64: Mapping[str, Any], folder: str, make_port: MakePort,
             replay_one: ReplayOne) -> Tuple[Flip, ...]:
    """The layers whose float64 decisions differ between the golden's state (`excerpt`) and the
    port's own run's (`own64`, the float64 step from it, probed)."""
    ran = _float64(excerpt, folder, make_port, replay_one, taps=True)
    return () if isinstance(ran, str) else _flips(ran.probe.probed, ran.values, own64)


@dataclass
class _Runs:
    """The one-step replays of the port in float32 and float64: the layers whose decisions differ,
    the float64 run's statistics against the step, its values and the layers its probe saw."""

    flips: Tuple[Flip, ...]
    stats: Dict[str, Stats]
    values: Dict[str, Any]
    probed: List[_Probed]


@dataclass
class _Float64:
    stats: Dict[str, Stats]
    values: Dict[str, Any]
    probe: Probe


def _both(excerpt: str, folder: str, make_port: MakePort, replay_one: ReplayOne, taps: bool = False) -> "_Runs | str":
    """Replay the one-step `excerpt` with the port in float32 and in float64 (or why the float64
    port could not run); taps: as for _float64."""
    model32, step32, own32 = make_port()
    probe32 = Probe(model32)
    with probe32.installed():
        ran32 = replay_one(excerpt, model32, step32, own32, os.path.join(folder, "float32.h5"))
    with ran32:
        ran64 = _float64(excerpt, folder, make_port, replay_one, taps=taps)
        if isinstance(ran64, str):
            return ran64
        flips = _flips(probe32.probed, ran32.step(0), ran64.values, (probe32.layers, ran64.probe.layers))
    return _Runs(flips, ran64.stats, ran64.values, ran64.probe.probed)


def _float64(excerpt: str, folder: str, make_port: MakePort, replay_one: ReplayOne,
             flips: Optional[Mapping[int, np.ndarray]] = None, taps: bool = False) -> "_Float64 | str":
    """The port built and run in float64 on the one-step `excerpt`, probed (its ReLU decisions
    turned over at `flips`), compared with it under the arbiter's tolerance; or why it could not run.
    taps: keep only the taps' values (what the layers decided; a step's float64 state and gradients
    are 3.5 GB on BERT-base), not what an update rule is applied to."""
    try:
        with float64_policy(), float64_creations():
            model64, step64, own64 = make_port()
            check_float64(model64)
            probe64 = Probe(model64, flips)
            with probe64.installed():
                ran64 = replay_one(excerpt, model64, cast_up(step64), own64,
                                   os.path.join(folder, "float64-%d.h5" % len(os.listdir(folder))))
    except Exception as exc:  # the port cannot compute in float64: no verdict, which counts as the port's
        return why_mixed(exc)
    with ran64:
        values64 = ran64.step(0)
        values = {key: values64[key] for key in values64 if not taps or split_key(key)[0] == "tap"}
        stats64 = step_stats(compare(excerpt, ran64, arbiter_tolerance(), diagnose=False))
    return _Float64(stats64, values, probe64)


def _flips(probed: List[_Probed], a: Mapping[str, Any], b: Mapping[str, Any],
           layers: Optional[Tuple[List[Any], List[Any]]] = None) -> Tuple[Flip, ...]:
    """The layers, in the model's order, whose decisions differ between two probed runs `a` and
    `b`; `layers`: the two runs' layers, to tell a max-pooling layer's choices apart (without
    them, between two trajectories, its choices are not told apart from its input here)."""
    found = []
    for p in probed:
        key = make_key("tap", "%s%d" % (PREFIX, p.index))
        if key not in a or key not in b:
            continue
        label, inner = "layer %s" % p.name, key + "#in"
        if p.selecting and layers is not None and inner in a and inner in b:
            flip = _selection(label, layers[0][p.index], layers[1][p.index], a[inner], b[inner])
        elif p.selecting and layers is None:
            flip = None
        else:
            flip = zero_flips(label, a[key], b[key])
        if flip is not None:
            found.append(flip)
    return tuple(found)


def _selection(label: str, layer32: Any, layer64: Any, in32: np.ndarray, in64: np.ndarray) -> Optional[Flip]:
    """A max-pooling layer's choices in each run, as the gradient of its output with respect to
    its input (1 where an element was chosen)."""
    x32, x64 = tf.constant(in32), tf.constant(in64)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x32, x64])
        y32, y64 = layer32(x32), layer64(x64)
    route32, route64 = tape.gradient(y32, x32), tape.gradient(y64, x64)
    at64 = tape.gradient(y32, x32, output_gradients=tf.cast(y64, y32.dtype))
    return selection_flips(label, route32.numpy(), route64.numpy(), at64.numpy(), in64)
