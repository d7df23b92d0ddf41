"""The TF2 runner: replays a golden through a TF2 training step (eager or tf.function).

It maps the port's variables to the golden's and loads the initial state
(variables.py), and for each step installs, for the step's length only: the random
tape (random_tape.py), the Keras optimizer hooks that report gradients, learning
rate and loss and convert TF1 slots (optimizer.py), the `tracekit.tap` sink, the watch
of the port's source lines (sources.py) and a variable-creation check (a step after the
first must create none). What the step produced is collected by a Capture (capture.py);
replay/loop.py drives the steps, port_step.py calls the port's.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Collection, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from .. import taps
from ..errors import ReplayError, StaleStep, UsageError
from ..keys import REGULARIZATION, make_key, replica_name, split_key
from ..replay import converted
from ..replay.options import ReplayOptions
from ..replay.perturb import move
from ..replay.port_state import starts_fresh
from ..replay.slots import golden_state, one_value
from ..replay.variables import cast_for, initial_value, model_variables, pair_port, unwrap
from .capture import Capture, VariableReader, numpy, passed_key, weakly
from .counters import OPTIMIZERS, CounterFeed
from .distribute import Distribution, StepFacts, disagreeing_copies, unsynchronized_batch_norm
from .keras_optimizers import keras_of
from .optimizer import OptimizerBridge
from .perturb import GradientJitter, Jitter
from .random_tape import RandomTape
from .sources import SourceWatch
from .tf_import import tf

# Why a replay under a strategy has no cross-replica value of a tap or random draw.
_PER_REPLICA = "per replica only (no batch axis to join the replicas' values on): see <name>@replica<id>"
_OTHER_WORKERS = "per replica only (other workers hold the rest of the global batch): see <name>@replica<id>"


class TF2Runner:
    """The TF2 side of one replay: maps variables, loads state, runs steps, reads state."""

    def __init__(self, golden: Any, options: ReplayOptions, pass_through: bool = False,
                 distribution: Optional[Distribution] = None) -> None:
        model, variables, var_map = options.model, options.variables, options.var_map
        self.golden = golden
        self.distribution = distribution
        self._slips: Dict[str, Dict[str, Any]] = {}  # StepFacts field -> {"step": first seen, "tensors": [...]}
        # digests made in the port's function only where the golden keeps some (else no ops for them)
        self.capture = Capture(digests=any(t.digests for t in golden.catalog))
        self.not_replayed: Dict[str, str] = {}
        self._model = model
        split = golden_state(golden, "Keras", "TF2")
        self.not_replayed.update(split.not_replayed)
        if model is None and REGULARIZATION in [make_key("loss", n) for n in golden.names("loss")]:
            self.not_replayed[REGULARIZATION] = "pass model= to compare it with the sum of model.losses"
        tf_vars = list(variables) if variables is not None else model_variables(model)
        paired = pair_port(golden, tf_vars, var_map, list(options.convert), split.model_names, split.slots,
                           split.iterations, split.keys)
        self.conversions, self.mapping, self.port_state = paired.conversions, paired.mapping, paired.state
        self.not_replayed.update(paired.not_replayed)
        slot_names, iterations = paired.slots, paired.iterations  # left to the port's optimizers
        self.tape = RandomTape(self.capture, inject=options.random == "tape", pass_through=pass_through,
                               distribution=distribution)
        watched: List[Tuple[Any, List[str]]] = []  # port variable -> the golden's names of it
        for name, cand in self.mapping.pairs.items():  # a Keras 3 variable assigns the tf.Variable it holds
            watched += [(obj, [name]) for obj in (cand.obj, getattr(cand.obj, "_value", None)) if obj is not None]
        watched += [(v, list(conv.golden)) for conv in self.conversions for v in conv.port]
        self._names_by_id = {id(obj): names for obj, names in watched}
        self.sources = SourceWatch(self._golden_names, [obj for obj, _ in watched])  # the port's lines (sources.py)
        self.optimizer = OptimizerBridge(golden, self.mapping, slot_names, iterations, split.keys, self.capture,
                                         load_initial=options.init == "golden", conversions=self.conversions,
                                         replicas=distribution.local_ids if distribution is not None else (),
                                         sources=self.sources)
        self._created: List[str] = []
        self._reader = VariableReader()
        self._forced_taps: Optional[Dict[str, np.ndarray]] = None  # forcing="taps": this step's golden taps
        self._step_index = -1
        self._tap_error: Optional[ReplayError] = None  # why a forced tap failed (TF wraps it in its own error)
        self._nudged: Optional[int] = None  # the seed of nudge(): a state forced later is nudged again
        self._jitter: Optional[Jitter] = None  # nudge(every_step=True): moves the variables after every step
        self._gradient_jitter: Optional[GradientJitter] = None  # and every gradient the steps take
        self._own_initial: Dict[str, np.ndarray] = {}  # "slot/<name>" -> the port's own start of a state it holds
        self._own_named: Set[str] = set()  # the optimizer's own_initial keys, once handed over
        self.counters = self.optimizer.feed = CounterFeed(golden)  # TF1's racy reads of its step counter

    # ---- state --------------------------------------------------------------------------------

    def load_initial(self) -> None:
        """Assign the golden's initial model variables (slots follow at the first update)."""
        for name, cand in self.mapping.pairs.items():
            cand.obj.assign(cast_for(initial_value(self.golden, "var", name), cand.obj))
        for conv in self.conversions:
            values = conv.values_to_port([initial_value(self.golden, "var", n) for n in conv.golden])
            for variable, value in zip(conv.port, values):
                variable.assign(cast_for(value, variable))
        held = self.port_state
        if held.held:
            own = dict(held.read(numpy))
            initial = {key: initial_value(self.golden, *split_key(key)) for key in held.keys}
            held.assign(initial, cast_for)
            if starts_fresh(self.golden):  # where the port's optimizer would start, beside where TF1's did
                self._own_initial = {key: value for key, value in own.items()
                                     if split_key(key)[0] == "slot" and one_value(initial[key])}

    def nudge(self, seed: int, every_step: bool = False) -> None:
        """Move the port's variables one ulp at random (`seed`; perturb.move): the perturbed start
        tracekit.tf2.calibrate measures the model's sensitivity to round-off from. Optimizer slots
        are loaded at the first update, after this, and stay as the golden has them. every_step:
        after every step too, by up to one eps of each tensor's scale, and every gradient the
        steps take likewise (another program's round-off differs at every step, in every
        activation and gradient): the drift envelope's replays (tf2/verdict.py)."""
        self._nudged = seed
        self._jitter = Jitter(self._moved()) if every_step else None
        if every_step:
            self._gradient_jitter = GradientJitter(seed)
            self.optimizer.move_gradients(self._gradient_jitter)
        move(self._moved(), seed, numpy)

    def after_step(self, index: int) -> None:
        if self._nudged is not None and self._jitter is not None:
            self._jitter(self._nudged * 1_000_003 + index + 1)
        if self._gradient_jitter is not None:
            self._gradient_jitter.step()

    def _moved(self) -> List[Any]:
        """The variables a nudge moves: the port's mapped and converted ones."""
        return [cand.obj for cand in self.mapping.pairs.values()] + [v for c in self.conversions for v in c.port]

    def force_state(self, state: Mapping[str, np.ndarray], rates: Mapping[str, float]) -> List[str]:
        """Teacher forcing: the golden's variables, slots and step count (`state`, "kind/name" ->
        value, after the step before) into the port; `rates`: that step's learning rates.
        Returns the keys set."""
        forced = []
        for name, cand in self.mapping.pairs.items():
            value = state.get(make_key("var", name))
            if value is not None:
                cand.obj.assign(cast_for(value, cand.obj))
                forced.append(make_key("var", name))
        for conv in self.conversions:
            values = [state.get(make_key("var", n)) for n in conv.golden]
            if all(v is not None for v in values):
                for variable, value in zip(conv.port, conv.values_to_port(values)):
                    variable.assign(cast_for(value, variable))
                forced.extend(make_key("var", n) for n in conv.golden)
        forced += self.port_state.assign(dict(state), cast_for)
        forced += self.optimizer.force(dict(state), dict(rates))
        if self._nudged is not None:  # a perturbed replay restarted from the golden's state stays perturbed
            move(self._moved(), self._nudged, numpy)
        return forced

    def port_scales(self, state: Mapping[str, np.ndarray]) -> Dict[str, float]:
        return converted.scales(self.conversions, state)

    def force_taps(self, taps: Mapping[str, np.ndarray]) -> None:
        if self.distribution is not None:
            raise UsageError("forcing='taps' under a tf.distribute strategy is not supported (a replica's tap holds "
                             "its part of the batch): use forcing='state'")
        self._forced_taps = dict(taps)

    def own_initial(self) -> Dict[str, np.ndarray]:
        """Handed over once: the runner keeps their names only (they weigh as much as the slots)."""
        out = dict(self.optimizer.own_initial, **self._own_initial)
        self._own_named.update(self.optimizer.own_initial)
        self.optimizer.own_initial, self._own_initial = {}, {}
        return out

    def read_state(self, digested: Collection[str] = ()) -> List[Tuple[str, Any]]:
        """("kind/golden name", value) of every mapped variable, slot and the step counter; of the
        keys in `digested`, those held as they are (no conversion, one replica) as their Digest."""
        variables = [cand.obj for cand in self.mapping.pairs.values()] + [v for c in self.conversions for v in c.port]
        variables += self.optimizer.state_variables() + self.port_state.variables()
        wanted = set(digested)
        direct = [cand.obj for name, cand in self.mapping.pairs.items() if make_key("var", name) in wanted]
        direct += self.optimizer.unconverted(wanted) + self.port_state.unconverted(wanted)
        value_of = numpy if self.distribution is not None else self._reader.read(variables, direct)
        out = []
        for name, cand in self.mapping.pairs.items():
            out.append((make_key("var", name), value_of(cand.obj)))
            if self.distribution is not None:
                out.extend(disagreeing_copies(make_key("var", name), cand.obj, self.distribution.local_ids))
        for conv in self.conversions:
            values = conv.values_to_golden([value_of(v) for v in conv.port])
            out.extend((make_key("var", name), value) for name, value in zip(conv.golden, values))
        return out + self.port_state.read(value_of) + self.optimizer.read(value_of)

    def regularization(self) -> Optional[np.ndarray]:
        """The sum of the model's weight regularization losses now (TF1's regularization
        losses). Losses a layer added in a call inside a tf.function (an activity loss, a KL
        divergence) are that trace's symbolic tensors, not values: they are the step's loss."""
        losses = [l for l in getattr(self._model, "losses", None) or [] if not tf.is_symbolic_tensor(l)]
        if not losses:
            return None
        return numpy(tf.add_n([tf.cast(l, tf.float32) for l in losses]))

    # ---- a step -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def step(self, index: int, draws: List[Tuple[str, np.ndarray]], first: bool, full: bool = True,
             counters: Mapping[str, int] = {}, digested: Collection[str] = ()) -> Iterator[Capture]:
        self._step_index = index
        self.capture.reset()
        self.capture.full = full
        self.capture.plan(() if self.distribution is not None else digested)
        self.tape.start(index, draws)
        self._created = []
        self.capture.live = True
        try:
            self.counters.before(counters, self._counter)
            with self.tape.installed(), self.optimizer.installed(first), taps.capturing(self._tap), \
                    tf.variable_creator_scope(self._creator), self.sources.installed(first):
                yield self.capture
        except Exception:
            if self.capture.stale():
                raise StaleStep(self.capture.stale()) from None
            for error in (self.tape.error, self.optimizer.error, self._tap_error):  # TF wraps ours in its own errors
                if error is not None:
                    raise error from None
            raise
        finally:
            self.capture.live = False
            self.counters.after(index, counters, self._counter)
        if self.distribution is not None:
            self._join(index, draws)
        self.optimizer.convert_gradients(self.capture.values)
        if index == 0:
            self.not_replayed.update(self.optimizer.counted())
            self.not_replayed.update(self.optimizer.unclipped_reasons())
            self.not_replayed.update(self.optimizer.not_demanded)
        if self.capture.stale():
            raise StaleStep(self.capture.stale())
        if not first and self._created:
            raise ReplayError("step %d created variables (%s): a TF2 port must create its variables once, before "
                              "or in its first step (of each train op)" % (index, ", ".join(self._created[:5])))

    def _counter(self, name: str) -> Any:
        """Where the port holds the golden's step counter `name` (counters.py): (its variable, what
        it counts a step), OPTIMIZERS, or None."""
        cand = self.mapping.pairs.get(name)
        if cand is not None:
            return cand.obj, 1
        for held in self.port_state.held:
            if held.keys == (make_key("var", name),) and held.conversion is None:
                return held.variables[0], 1
        return OPTIMIZERS if self.optimizer.counts(name) else None

    def _join(self, index: int, draws: List[Tuple[str, np.ndarray]]) -> None:
        """The replicas' values -> the cross-replica values the golden holds: gradients as the
        optimizer applied them, the loss summed (each replica's share of the global batch's),
        batch-shaped taps put back in row order; per-replica taps and losses kept beside them as
        "<name>@replica<id>"."""
        distribution, capture, facts = self.distribution, self.capture, StepFacts()
        assert distribution is not None
        for key, per in capture.replicas.items():
            kind, name = key.split("/", 1)
            if name.startswith("#passed:"):
                continue
            lowest = per[min(per)]
            if kind == "grad":
                capture.values[key] = distribution.join_gradient(key, per, capture.replicas.get(passed_key(key), {}),
                                                                 self.optimizer.aggregated.get(key, True), facts)
                continue
            if kind == "loss":
                capture.values[key] = np.sum([per[r] for r in sorted(per)], axis=0, dtype=lowest.dtype)
            elif kind == "tap":
                joined = distribution.join_batch(per)
                if joined is not None:
                    capture.values[key] = joined
                else:
                    self.not_replayed[key] = _PER_REPLICA if distribution.complete else _OTHER_WORKERS
            else:  # the learning rate and the like: the same on every replica
                capture.values[key] = lowest
            if kind in ("tap", "loss"):
                capture.values.update((make_key(kind, replica_name(name, r)), v) for r, v in sorted(per.items()))
        if capture.replica_draws and distribution.complete:
            capture.draws = distribution.join_draws([value.shape for _, value in draws], capture.replica_draws)
        elif capture.replica_draws:  # another worker drew the rest: this one's draws, per replica
            for rid, taken in sorted(capture.replica_draws.items()):
                for (name, _), value in zip(draws, taken):
                    capture.values[make_key("random", replica_name(name, rid))] = value
            self.not_replayed.update((make_key("random", name), _OTHER_WORKERS) for name, _ in draws)
        for slip, tensors in vars(facts).items():
            if tensors and slip not in self._slips:
                self._slips[slip] = {"step": index, "tensors": tensors}

    def meta(self) -> Dict[str, Any]:
        """What the replay learned, for the actual trace's replay metadata; `own_initial`: the
        slots whose initial state in the trace is the port's own, the golden's being what the
        steps started from."""
        found: Dict[str, Any] = {"own_initial": sorted(self._own_named.union(self.optimizer.own_initial)),
                                 "optimizer_settings": self.optimizer.settings,
                                 "applies": self.optimizer.applies,
                                 "keras": self.kerases(),
                                 "reshaped_draws": dict(self.tape.reshaped), "draw_rates": dict(self.tape.rates),
                                 "sources": self.sources.meta(), "counter_reads": dict(self.counters.fed),
                                 "loaded": {"read_back": sorted(k for k, ok in self.optimizer.loaded.items() if ok),
                                            "otherwise": sorted(k for k, ok in self.optimizer.loaded.items() if not ok)}}
        if self.distribution is None:
            return found
        out = self.distribution.layout.to_meta()
        out["unsynchronized_batch_norm"] = unsynchronized_batch_norm(self._model)
        out["slips"] = dict(self._slips)
        found["distribution"] = out
        return found

    def kerases(self) -> Dict[str, List[str]]:
        """Which Keras the port's model and optimizers come from (keras_optimizers.keras_of)."""
        out = {"model": [keras_of(self._model)] if self._model is not None else [],
               "optimizer": [keras_of(o) for o in self.optimizer.optimizers]}
        return {part: sorted({k for k in found if k is not None}) for part, found in out.items()}

    def check_step(self, index: int, updated: Sequence[str]) -> None:
        self.tape.check(index)
        self.optimizer.check_complete(index, updated)

    def _creator(self, next_creator: Callable[..., Any], **kwargs: Any) -> Any:
        variable = next_creator(**kwargs)
        self._created.append(getattr(variable, "name", "?"))
        return variable

    def _golden_names(self, variable: Any) -> List[str]:
        """The golden's names of a port variable (mapped, or converted), [] for others."""
        return self._names_by_id.get(id(variable)) or self._names_by_id.get(id(unwrap(variable))) or []

    def _tap(self, name: str, tensor: Any) -> Any:
        self.sources.tap(name, tensor)
        self.capture.put(make_key("tap", name), tensor)
        if self._forced_taps is None:
            return tensor
        # The golden's value forward, the port's gradient backward: forced + (x - x) is the
        # forced value exactly, and its derivative with respect to x is 1.
        return tf.stop_gradient(self._golden_tap(name, tensor)) + (tensor - tf.stop_gradient(tensor))

    def _golden_tap(self, name: str, tensor: Any) -> Any:
        """A tensor holding, each time the step runs, the golden's tap `name` of that step (a side
        op: a tf.function traced once still reads each step's value)."""
        dtype, shape = tensor.dtype, tensor.shape

        def golden() -> np.ndarray:
            value = (self._forced_taps or {}).get(name)
            if value is None:
                self._tap_error = ReplayError("forcing='taps': the port taps %r at step %d, and the golden recorded no "
                                              "such tap there (tracekit show lists its taps)" % (name, self._step_index))
            elif not shape.is_compatible_with(np.shape(value)):
                self._tap_error = ReplayError("forcing='taps': tap %r is %s in the port, %s in the golden at step %d"
                                              % (name, shape, np.shape(value), self._step_index))
            if self._tap_error is not None:
                raise self._tap_error
            return np.asarray(value, dtype=dtype.as_numpy_dtype)
        forced = tf.numpy_function(weakly(golden, self.capture.held), [], dtype, stateful=True,
                                   name="tracekit_forced_tap")
        forced.set_shape(shape)
        return forced
