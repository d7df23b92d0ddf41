"""The port's optimizers during a replay: what they apply, and their slots in TF1 terms.

Keras optimizers' `apply_gradients` (which `minimize` calls) is intercepted for the
length of a step: it reports the gradients applied and the learning rate used; on
the first call it builds the slots, pairs them with the golden's TF1 slots and,
with init="golden", loads the golden's initial slots and iteration count.
`minimize` reports the loss it computes. TF1's own optimizers, which run in TF2 as
tf.compat.v1.train.*, are intercepted the same way: their slots are TF1's, and the step
counter is the global_step they are given.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Collection, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..errors import ReplayError
from ..keys import MICRO, UNCLIPPED, make_key, split_key
from ..replay.conversions import Conversion
from ..replay.forcing import reads_back
from ..replay.patched import patched
from ..replay.port_state import starts_fresh, unmapped_state
from ..replay.slots import Slot, compact, inert_slots, one_value
from ..replay.variables import cast_for, initial_value, unwrap
from ..replay.varmap import Mapping
from .capture import Capture, numpy, passed_key, port_grad_key, when_run
from .counters import CounterFeed
from .distribute import disagreeing_copies, replica_id
from .gradients import GradientWatch, gradient_keys
from .keras_optimizers import aggregates, delegates, optimizer_classes
from .optimizer_terms import (applied, convention, is_v1, keras_slot, learning_rate, ported_rate,
                              settings, slot_from_tf1, slot_to_tf1, TF1_MOMENTUM)
from .sources import SourceWatch
from .tf_import import tf



def step_counter(optimizer: Any) -> Tuple[Any, int]:
    """(the variable a Keras optimizer counts its steps in, how many apply_gradients calls make
    a step): its `iterations`, one call each; with Keras 3's gradient_accumulation_steps=N, whose
    `iterations` is a tensor (calls // N), the variable counting the calls, N of them."""
    steps = getattr(optimizer, "gradient_accumulation_steps", None)
    calls = getattr(optimizer, "_iterations", None)
    if steps and calls is not None and hasattr(calls, "assign"):
        return calls, int(steps)
    return optimizer.iterations, 1


def calls_per_update(optimizer: Any) -> int:
    """The apply_gradients calls of `optimizer` that make one update (TF1's optimizers: one)."""
    return 1 if is_v1(optimizer) else step_counter(optimizer)[1]

class OptimizerBridge:
    """The golden's TF1 optimizer state on one side, the port's Keras optimizers on the other:
    any number of them, each over its own variables, each paired with the TF1 optimizer whose
    slots and learning rate match."""

    def __init__(self, golden: Any, mapping: Mapping, golden_slots: List[Slot],
                 iterations: List[str], keys: Dict[str, str], capture: Capture, load_initial: bool,
                 conversions: Sequence[Conversion] = (), replicas: Sequence[int] = (),
                 sources: Optional[SourceWatch] = None) -> None:
        self.golden = golden
        self._replicas = list(replicas)  # under a strategy: this worker's replica ids
        self.capture = capture
        self._mapping = mapping
        self._golden_slots = golden_slots
        self._iterations = iterations  # golden names of the step counter
        self._keys = keys  # golden state name -> "var/..." or "slot/..."
        self._load_initial = load_initial
        self._by_var = {id(c.obj): name for name, c in mapping.pairs.items()}
        # variables whose gradient the golden holds as rows and indices (an IndexedSlices)
        self._sparse = {n[:-len("/values")] for n in golden.names("grad") if n.endswith("/values")}
        # variables whose gradient the golden holds before clipping too, and what the port clipped:
        # id(a tf.clip_by_global_norm output in this step) -> its input
        self._unclipped = {n[:-len(UNCLIPPED)] for n in golden.names("grad") if n.endswith(UNCLIPPED)}
        self._unclipped_seen: Set[str] = set()
        micro = {n[:-len(MICRO)] for n in golden.names("grad") if n.endswith(MICRO)}  # each micro-batch's gradient
        # gradients a hand-written optimizer applies, and each micro-batch's
        self._watch = GradientWatch(capture, self._name_of, self._sparse, micro, set(self._unclipped))
        self._applies = 0.0  # the updates the optimizers' apply_gradients calls made in the step being run
        self._inside = 0  # how deep in apply_gradients calls (a subclass's, its base's) this thread is
        self.applies: Optional[int] = None  # ... in the first step
        self._conversions = list(conversions)
        for i, conv in enumerate(self._conversions):  # their gradients are converted after the step
            self._by_var.update((id(v), port_grad_key(i, j)) for j, v in enumerate(conv.port))
            if all(name in self._unclipped for name in conv.golden):  # captured unclipped too, then converted
                self._unclipped.update(port_grad_key(i, j) for j in range(len(conv.port)))
        # (conversion, golden slot names, the port's slot variables, convention) per converted slot role
        self._converted_slots: List[Tuple[Conversion, List[str], List[Any], str, str]] = []
        self._slots: List[Tuple[str, Any, str, str]] = []  # golden name, TF2 slot variable, convention, lr name
        self.optimizers: List[Any] = []  # in the order of their first update
        self._lr_names: Dict[int, str] = {}  # id(optimizer) -> the golden's name of its learning rate
        self._iteration_var: Any = None  # the first optimizer's: every optimizer counts the same steps
        self._calls_per_step = 1  # what _iteration_var counts per step (Keras 3's gradient_accumulation_steps)
        self.feed: Optional[CounterFeed] = None  # TF1's racy counter reads: each optimizer's schedule takes them
        self.error: Optional[ReplayError] = None  # why pairing failed inside a traced step
        self._wrappers: Optional[List[Tuple[Any, str, Callable[..., Any]]]] = None  # (class, method, wrapper)
        self.aggregated: Dict[str, bool] = {}  # grad key -> whether its optimizer all-reduced it over replicas
        # "slot/<golden name>" -> the port's own initial value of that slot (TF1 convention), read
        # before the golden's replaced it: the loop compares it as the initial state.
        self.own_initial: Dict[str, np.ndarray] = {}
        # golden variable name -> {"optimizer": the port's class, "settings": {TF1 argument: [its name, value]}}
        self.settings: Dict[str, Dict[str, Any]] = {}
        # golden slots that do nothing for the run (inert_slots) -> why; those the port's optimizer lacks are
        # not demanded of it: "slot/<name>" -> why, after its first update
        self._inert = inert_slots(golden, golden_slots)
        self.not_demanded: Dict[str, str] = {}
        self._sources = sources  # the port's lines (sources.py), where the runner keeps them
        # the state the optimizers' first updates loaded ("kind/name"), and whether each read back as the golden's
        self.loaded: Dict[str, bool] = {}
        if sources is not None:
            self._watch.differentiated = sources.differentiated

    def state_variables(self) -> List[Any]:
        """The variables `read` reads: the paired slots and the step counter."""
        out = [var for _, var, _, _ in self._slots] + [var for _, _, slots, _, _ in self._converted_slots
                                                        for var in slots]
        return out + ([self._iteration_var] if self._iteration_var is not None else [])

    def unconverted(self, keys: Collection[str]) -> List[Any]:
        """The slot variables of `keys` ("slot/<golden name>") whose values are the golden's as
        they are (no momentum convention, no conversion): `read` may be given their digests."""
        return [var for name, var, role, _ in self._slots if role != TF1_MOMENTUM and make_key("slot", name) in keys]

    def read(self, value_of: Callable[[Any], np.ndarray] = numpy) -> List[Tuple[str, np.ndarray]]:
        """("kind/golden name", value) of every mapped slot and the step counter, in TF1 terms;
        value_of(variable) is its value now (read one by one unless the caller read them at once)."""
        def lr(name: str) -> float:  # the rate of the update just made (TF1 momentum slots need it)
            return float(self.capture.values.get(make_key("lr", name), 1.0))
        out = []
        for name, var, role, rate in self._slots:
            out.append((make_key("slot", name), slot_to_tf1(value_of(var), role, lr(rate))))
            if self._replicas:
                out.extend(disagreeing_copies(make_key("slot", name), var, self._replicas,
                                              lambda v, role=role, rate=rate: slot_to_tf1(v, role, lr(rate))))
        for conv, names, slots, role, rate in self._converted_slots:
            values = conv.deltas_to_golden([slot_to_tf1(value_of(var), role, lr(rate)) for var in slots])
            out.extend((make_key("slot", name), value) for name, value in zip(names, values))
        if self._iteration_var is not None:
            step = np.asarray(value_of(self._iteration_var), dtype=np.int64) // self._calls_per_step
            out.extend((self._keys[name], step) for name in self._iterations)
        return out

    def force(self, state: Dict[str, np.ndarray], rates: Dict[str, float]) -> List[str]:
        """Teacher forcing: the golden's slots and step count (`state`, "kind/name" -> value) into
        the paired slots and counter; `rates`: the learning rates of the step that left them (TF1
        momentum slots convert with them). Slots exist from the first update on: forcing starts
        after step 0. Returns the keys set."""
        def lr(name: str) -> float:
            return float(rates.get(name, 1.0))
        forced = []
        for name, var, role, rate in self._slots:
            value = state.get(make_key("slot", name))
            if value is not None:
                var.assign(cast_for(slot_from_tf1(value, role, lr(rate)), var))
                forced.append(make_key("slot", name))
        for conv, names, slots, role, rate in self._converted_slots:
            values = [state.get(make_key("slot", name)) for name in names]
            if all(v is not None for v in values):
                golden = [slot_from_tf1(v, role, lr(rate)) for v in values]
                for var, value in zip(slots, conv.deltas_to_port(golden)):
                    var.assign(cast_for(value, var))
                forced.extend(make_key("slot", name) for name in names)
        for name in self._iterations:
            value = state.get(self._keys[name])
            if value is not None and self._iteration_var is not None:
                self._iteration_var.assign(int(value) * self._calls_per_step)
                forced.append(self._keys[name])
        return forced

    def counts(self, name: str) -> bool:
        """The golden's step counter `name` is left to the port's optimizers (their `iterations`)."""
        return name in self._iterations

    def convert_gradients(self, values: Dict[str, np.ndarray]) -> None:
        """After a step: the gradients a gradient call took that no optimizer reported (a
        hand-written optimizer's), then the port's gradients of converted variables, as the golden's."""
        self._watch.resolve(values, self._unclipped, self._unclipped_seen)
        for i, conv in enumerate(self._conversions):
            for suffix in ("", UNCLIPPED):
                port = [values.pop(make_key("grad", port_grad_key(i, j) + suffix), None) for j in range(len(conv.port))]
                if all(g is not None for g in port):
                    for name, grad in zip(conv.golden, conv.deltas_to_golden(port)):
                        values[make_key("grad", name + suffix)] = grad
                    if suffix:
                        self._unclipped_seen.update(conv.golden)

    def move_gradients(self, jitter: Callable[[List[Any]], List[Any]]) -> None:
        """A drift replay: every gradient the port takes is moved by `jitter` (perturb.GradientJitter)."""
        self._watch.jitter = jitter

    @contextlib.contextmanager
    def installed(self, first: bool = True) -> Iterator[None]:
        """Keras optimizers report to this replay while the context is open, and the gradient
        calls and tf.clip_by_global_norm what they returned (gradients.py); `first`: the first
        step of its kind."""
        if self._wrappers is None:  # made once, installed each step
            self._wrappers = [(cls, name, wrap(cls.__dict__[name]))
                              for name, wrap in (("apply_gradients", self._apply_gradients), ("minimize", self._minimize))
                              for cls in optimizer_classes(name)]
            self._wrappers += self._watch.wrappers()
        self._watch.start(first)
        self._applies = 0.0
        with patched(self._wrappers):
            yield
        if self.applies is None:
            self.applies = int(round(self._applies))

    def _count(self, optimizer: Any) -> None:
        """One apply_gradients call: an update, or 1/N of one (Keras 3's gradient_accumulation_steps=N)."""
        self._applies += 1.0 / calls_per_update(optimizer)

    def _apply_gradients(self, original: Callable[..., Any]) -> Callable[..., Any]:
        bridge = self

        def apply_gradients(optimizer: Any, grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
            if delegates(optimizer):
                return original(optimizer, grads_and_vars, *args, **kwargs)
            if not bridge._inside:  # a subclass's calling its base's is one update
                # counted as it runs (each pass of a traced loop)
                when_run([], lambda _: bridge._count(optimizer), bridge.capture.held)
            bridge._inside += 1
            try:
                return bridge._applied(original, optimizer, grads_and_vars, args, kwargs)
            finally:
                bridge._inside -= 1
        return apply_gradients

    def _applied(self, original: Callable[..., Any], optimizer: Any, grads_and_vars: Any, args: tuple,
                 kwargs: dict) -> Any:
        """One apply_gradients call: what it applies is captured (a base class's call, reached from
        a subclass's, again: it applies what the subclass made), then it runs."""
        bridge = self
        pairs = list(grads_and_vars)
        # TF1's optimizers count steps in the global_step they are given (Keras': iterations).
        counter = kwargs.get("global_step", args[0] if args else None) if is_v1(optimizer) else \
            step_counter(optimizer)[0]
        try:
            bridge._prepare_once(optimizer, [v for _, v in pairs], counter)
        except ReplayError as exc:  # kept: tf.function wraps it in its own error while tracing
            bridge.error = exc
            raise
        rate = make_key("lr", bridge._lr_names[id(optimizer)])
        bridge.capture.put(rate, learning_rate(optimizer))
        if bridge._sources is not None:
            bridge._sources.applied([v for _, v in pairs], rate)
        named = []
        given = applied(optimizer, pairs) if replica_id() is None else [g for g, _ in pairs]
        for (grad, var), used in zip(pairs, given):
            name = bridge._name_of(var)  # golden or port_grad_key
            if grad is None or name is None:
                continue
            # before clipping: what the port's tf.clip_by_global_norm was given, or what its
            # optimizer clips itself (global_clipnorm, clipnorm, clipvalue); the golden's
            # gradient is what the update applied
            before = grad if used is not grad else bridge._watch.before_clip.get(id(grad))
            grad = used
            if before is not None and name in bridge._unclipped:
                bridge._unclipped_seen.add(name)
                named.append((make_key("grad", name + UNCLIPPED), tf.convert_to_tensor(before)))
            named += gradient_keys(name, grad, name in bridge._sparse and replica_id() is None)
        aggregated = aggregates(optimizer, original, args, kwargs)
        bridge.aggregated.update((key, aggregated) for key, _ in named)
        if named and aggregated and replica_id() is not None:
            # Under a strategy the optimizer all-reduces what each replica passed: capture that
            # sum (the same collective), and what was passed, to tell a sum summed twice.
            context = tf.distribute.get_replica_context()
            reduced = context.all_reduce(tf.distribute.ReduceOp.SUM, [grad for _, grad in named])
            bridge.capture.put_many([(key, total) for (key, _), total in zip(named, reduced)] +
                                    [(passed_key(key), grad) for key, grad in named])
        else:  # one side op for the step's gradients; their mean where the optimizer accumulates them
            calls = calls_per_update(optimizer)
            bridge.capture.put_many(named, mean_of=calls if all(g.dtype.is_floating for _, g in named) else 1)
        return original(optimizer, pairs, *args, **kwargs)

    def unclipped_reasons(self) -> Dict[str, str]:
        """After the first step: the golden's gradients before clipping the port did not clip -> why."""
        return {make_key("grad", name + UNCLIPPED): "the port clipped no gradient of this variable (tf.clip_by_global_"
                "norm, or the optimizer's global_clipnorm, clipnorm, clipvalue): the gradient before clipping "
                "is not compared" for name in sorted(self._unclipped - self._unclipped_seen)
                if not name.startswith("#")
                if self.optimizers or self._watch.seen}

    def _minimize(self, original: Callable[..., Any]) -> Callable[..., Any]:
        capture = self.capture

        def minimize(optimizer: Any, loss: Any, *args: Any, **kwargs: Any) -> Any:
            if callable(loss):  # the usual Keras form: capture the loss where it is computed
                compute = loss

                def loss() -> Any:
                    value = compute()
                    capture.put("loss/loss", value)
                    return value
            elif loss is not None:
                capture.put("loss/loss", loss)
            return original(optimizer, loss, *args, **kwargs)
        return minimize

    def _name_of(self, variable: Any) -> Optional[str]:
        """The golden's name of a mapped variable (or a converted one's capture name), else None."""
        return self._by_var.get(id(variable)) or self._by_var.get(id(unwrap(variable)))

    def _prepare_once(self, optimizer: Any, var_list: List[Any], counter: Any) -> None:
        if any(known is optimizer for known in self.optimizers):
            return
        if replica_id() is None:
            self._prepare(optimizer, var_list, counter)
        else:  # once, in cross-replica context, where a strategy creates and assigns its variables
            prepare = tf.autograph.experimental.do_not_convert(lambda _: self._prepare(optimizer, var_list, counter))
            tf.distribute.get_replica_context().merge_call(prepare)

    def _prepare(self, optimizer: Any, var_list: List[Any], counter: Any) -> None:
        """An optimizer's first update: build its slots, pair them with the golden's slots of
        the variables it updates, and load their initial state. `counter`: its step count."""
        self.optimizers.append(optimizer)
        updated = {self._by_var.get(id(v)) or self._by_var.get(id(unwrap(v))) for v in var_list}
        with tf.init_scope():  # runs once, eagerly, also while a tf.function is traced
            own = {"optimizer": type(optimizer).__name__,
                   "settings": {arg: list(pair) for arg, pair in settings(optimizer).items()}}
            self.settings.update((name, own) for name in self._golden_names(updated))
            if self.feed is not None:
                self.feed.wrap(optimizer)
            if is_v1(optimizer):
                optimizer._create_slots([unwrap(v) for v in var_list])
            elif hasattr(optimizer, "_create_all_weights"):  # legacy (OptimizerV2)
                optimizer._create_all_weights(var_list)
            elif hasattr(optimizer, "build"):
                optimizer.build(var_list)
            first = self._iteration_var is None
            if first:
                self._iteration_var = counter
                self._calls_per_step = calls_per_update(optimizer)
            slots, converted = len(self._slots), len(self._converted_slots)
            plain, converted_slots = self._map_slots(optimizer, updated)
            paired = [name for name, _, _ in plain] + [n for _, names, _, _ in converted_slots for n in names]
            rate = self._lr_names[id(optimizer)] = ported_rate(self.golden, optimizer, updated, paired,
                                                               set(self._lr_names.values()))
            self._slots += [(name, slot, role, rate) for name, slot, role in plain]
            self._converted_slots += [(conv, names, port_slots, role, rate)
                                      for conv, names, port_slots, role in converted_slots]
            if self._load_initial:
                initial = self.golden.initial
                lr = float(numpy(learning_rate(optimizer)))
                fresh = starts_fresh(self.golden)
                for name, var, role, _ in self._slots[slots:]:
                    golden = initial_value(self.golden, "slot", name)
                    if fresh and one_value(golden):  # what the TF1 optimizer made: where the port's should start
                        self.own_initial[make_key("slot", name)] = compact(slot_to_tf1(numpy(var), role, lr))
                    var.assign(cast_for(slot_from_tf1(golden, role, lr), var))
                for conv, names, port_slots, role, _ in self._converted_slots[converted:]:
                    golden = [slot_from_tf1(initial_value(self.golden, "slot", name), role, lr) for name in names]
                    for var, value in zip(port_slots, conv.deltas_to_port(golden)):
                        var.assign(cast_for(value, var))
                for name in self._iterations:
                    if self._keys[name] in initial and counter is not None:
                        counter.assign(int(initial[self._keys[name]]) * self._calls_per_step)
                self._read_back(slots, converted, counter, lr)

    def _read_back(self, slots: int, converted: int, counter: Any, lr: float) -> None:
        """The state an optimizer's first update loaded (its slots from `slots` on, its converted
        slots from `converted` on, the step counter), read back at once in the golden's terms:
        each key into `loaded`, read back as the golden's or not (a step runs from it next)."""
        initial = self.golden.initial

        def got() -> Iterator[Tuple[str, Any]]:  # one at a time: a big model's slots are not all copied at once
            for name, var, role, _ in self._slots[slots:]:
                yield make_key("slot", name), slot_to_tf1(numpy(var), role, lr)
            for conv, names, port_slots, role, _ in self._converted_slots[converted:]:
                values = conv.deltas_to_golden([slot_to_tf1(numpy(var), role, lr) for var in port_slots])
                yield from ((make_key("slot", name), value) for name, value in zip(names, values))
            if counter is not None:
                yield from ((self._keys[name], numpy(counter) // self._calls_per_step) for name in self._iterations
                            if self._keys[name] in initial)
        for key, value in got():
            self.loaded[key] = reads_back(value, initial[key])

    def _golden_names(self, updated: Set[Optional[str]]) -> List[str]:
        """The golden variables behind `updated` (golden names, or converted variables' capture names)."""
        out: List[str] = []
        for name in sorted(n for n in updated if n is not None):
            if name.startswith("#conversion"):
                out.extend(self._conversions[int(name[len("#conversion"):].split("/")[0])].golden)
            else:
                out.append(name)
        return out

    def counted(self) -> Dict[str, str]:
        """After the first step: the golden's step counters no optimizer counts -> why (a TF1
        optimizer given no global_step)."""
        if self._iteration_var is not None or not self.optimizers:
            return {}
        return {self._keys[name]: "no step counter: pass global_step= to the TF1 optimizer's apply_gradients "
                                  "or minimize to compare it" for name in self._iterations}

    def check_complete(self, index: int, updated: Sequence[str]) -> None:
        """After step `index`: every golden slot of a variable the golden's step updated
        (`updated`, the golden's gradients) found its optimizer."""
        count = len(self._slots) + sum(len(names) for _, names, _, _, _ in self._converted_slots)
        if count + len(self.not_demanded) == len(self._golden_slots):  # all paired: every step after the first few
            return
        paired = {name for name, _, _, _ in self._slots}
        paired.update(split_key(key)[1] for key in self.not_demanded)
        paired.update(name for _, names, _, _, _ in self._converted_slots for name in names)
        wanted = set(updated)
        left = [(s.name, s.var) for s in self._golden_slots if s.name not in paired and s.var in wanted]
        if left and self.optimizers:
            raise ReplayError("step %d: the golden's step updated the variables of %d optimizer slots that no TF2 "
                              "optimizer has updated yet:\n%s\nupdate them with an optimizer in this step (one per TF1 "
                              "optimizer is fine; with a step function per train op, check which one ran)"
                              % (index, len(left), "\n".join("  only in the golden: %s (of %s)" % pair
                                                              for pair in left)))
        elif left and self._watch.seen:  # a hand-written optimizer: its state is not mapped
            roles = {s.name: s.role for s in self._golden_slots}
            counters = [self._keys[name] for name in self._iterations] if self._iteration_var is None else []
            raise ReplayError(unmapped_state(index, [(name, var, roles[name]) for name, var in left], counters))

    def _map_slots(self, optimizer: Any, updated: Set[Optional[str]]) -> Tuple[list, list]:
        """Pair the golden's slots of the variables this optimizer updates (`updated`: golden
        names, or converted variables' capture names) with its slots: (plain, converted). A golden
        slot it lacks stops the replay before its first update, listed like the variables."""
        tf2_of = {name: cand.obj for name, cand in self._mapping.pairs.items()}
        converted = {name: (i, k) for i, conv in enumerate(self._conversions) for k, name in enumerate(conv.golden)}
        by_role: Dict[Tuple[int, str], Dict[int, Slot]] = {}  # (conversion, role) -> golden var index -> slot
        plain, converted_slots, missing = [], [], []
        for golden_slot in self._golden_slots:
            name, var_name, role = golden_slot.name, golden_slot.var, golden_slot.role
            if var_name in converted:
                i, k = converted[var_name]
                if port_grad_key(i, 0) in updated:
                    by_role.setdefault((i, role), {})[k] = golden_slot
                continue
            if var_name not in updated:
                continue  # another optimizer's
            variable = tf2_of.get(var_name)
            slot = None if variable is None else keras_slot(optimizer, variable, role)
            if slot is None and name in self._inert:
                self.not_demanded[make_key("slot", name)] = self._inert[name]
            elif slot is None:
                missing.append("  only in the golden: %s (%s of %s)" % (name, role, var_name))
            else:
                plain.append((name, slot, convention(optimizer, golden_slot)))
        for (i, role), slots_of in by_role.items():
            names = {k: golden_slot.name for k, golden_slot in slots_of.items()}
            conv = self._conversions[i]
            slots = [keras_slot(optimizer, variable, role) for variable in conv.port]
            if len(names) != len(conv.golden) or any(slot is None for slot in slots):
                missing.extend("  only in the golden: %s (%s of %s, converted)" % (n, role, conv.golden[k])
                               for k, n in sorted(names.items()))
            else:
                ordered = [names[k] for k in range(len(conv.golden))]
                converted_slots.append((conv, ordered, slots, convention(optimizer, slots_of[0])))
        if missing:
            raise ReplayError(
                "the TF2 optimizer (%s) has no slot for %d of the golden's optimizer slots of the variables it "
                "updates:\n%s\nuse the optimizer the TF1 code used for them (AdamOptimizer -> Adam, "
                "MomentumOptimizer -> SGD(momentum=...), RMSPropOptimizer -> RMSprop)"
                % (type(optimizer).__name__, len(missing), "\n".join(missing)))
        return plain, converted_slots

