"""What the runners of ports outside TensorFlow (tracekit/torch/, tracekit/jax/) share,
framework-free: the state they pair, load, read and force through objects that assign and read
numpy values (a PyTorch parameter in TF's layout, a leaf of a JAX train state), whatever holds
them. Each adapter's runner adds its optimizer bridge, random tape, taps and step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..keys import REGULARIZATION, make_key, split_key
from . import converted
from .perturb import move
from .variables import cast_for, initial_value


@dataclass
class Captured:
    """What one step of the port gave: "kind/name" -> value, and the draws it took."""

    values: Dict[str, np.ndarray] = field(default_factory=dict)
    draws: List[np.ndarray] = field(default_factory=list)


class PortRunner:
    """The shared part of a runner (loop.py's Runner). A subclass sets `golden`, `mapping`,
    `conversions`, `port_state`, `optimizer` (read(), force(state), own_initial), `not_replayed`
    and `_step_index`; `keeps` names what its port keeps its variables in, for messages."""

    keeps = "the port"
    golden: Any
    mapping: Any
    conversions: List[Any]
    port_state: Any
    optimizer: Any
    not_replayed: Dict[str, str]
    _step_index: int = -1
    _forced_taps: Optional[Dict[str, np.ndarray]] = None

    def _init_shared(self) -> None:
        self._own_named: set = set()  # the slots own_initial handed over
        self._counter_reads: Dict[str, Dict[str, Any]] = {}  # golden counter -> TF1's racy reads not fed
        self._captured = Captured()

    def _unfed_reads(self, index: int, counters: Mapping[str, int]) -> None:
        """TF1's racy reads of its step counter at this step (a schedule read the count another
        step had left): the port's schedule is not fed them; counted for the replay's metadata."""
        for name, offset in counters.items():
            if offset:
                record = self._counter_reads.setdefault(name, {
                    "steps": 0, "unfed": 0, "first_unfed": index,
                    "why": "a replay into %s does not move the port's counter for such a read (not built)" % self.keeps})
                record["unfed"] += 1

    def load_initial(self) -> None:
        for name, cand in self.mapping.pairs.items():
            cand.obj.assign(cast_for(initial_value(self.golden, "var", name), cand.obj))
        converted.load(self.conversions, lambda name: initial_value(self.golden, "var", name), cast_for)
        self.port_state.assign({key: initial_value(self.golden, *split_key(key)) for key in self.port_state.keys},
                               cast_for)

    def nudge(self, seed: int) -> None:
        """The port's variables, mapped and converted, moved one ulp at random (`seed`): the
        perturbed start calibrate measures the model's sensitivity to round-off from."""
        moved = [cand.obj for cand in self.mapping.pairs.values()] + [p for conv in self.conversions for p in conv.port]
        move(moved, seed, lambda held: held.numpy())

    def read_state(self, digested: Collection[str] = ()) -> List[Tuple[str, Any]]:
        out: List[Tuple[str, Any]] = [(make_key("var", name), cand.obj.numpy())
                                      for name, cand in self.mapping.pairs.items()]
        return (out + converted.read(self.conversions) + self.port_state.read(lambda held: held.numpy())
                + self.optimizer.read())

    def regularization(self) -> Optional[np.ndarray]:
        return None

    def force_state(self, state: Mapping[str, np.ndarray], rates: Mapping[str, float]) -> List[str]:
        forced = []
        for name, cand in self.mapping.pairs.items():
            value = state.get(make_key("var", name))
            if value is not None:
                cand.obj.assign(cast_for(value, cand.obj))
                forced.append(make_key("var", name))
        return (forced + converted.force(self.conversions, state, cast_for)
                + self.port_state.assign(dict(state), cast_for) + self.optimizer.force(state))

    def port_scales(self, state: Mapping[str, np.ndarray]) -> Dict[str, float]:
        return converted.scales(self.conversions, state)

    def force_taps(self, golden_taps: Mapping[str, np.ndarray]) -> None:
        self._forced_taps = dict(golden_taps)

    def own_initial(self) -> Dict[str, np.ndarray]:
        """Handed over once: the port's optimizer's own start of the slots the golden's replaced,
        where TF1's optimizer made them (an Adagrad accumulator of 0 where TF1's was 0.1): the
        replay's initial state of those slots, so such a port differs there."""
        out, self.optimizer.own_initial = self.optimizer.own_initial, {}
        self._own_named.update(out)
        return out

    def after_step(self, index: int) -> None:
        pass

    def returned(self, keys: Collection[str]) -> None:
        """What the port's step returned at its first step: the golden's regularization sum, which
        the port does not keep, is compared where the step returns it, and said not replayed where not."""
        if self._step_index == 0 and REGULARIZATION not in keys and \
                REGULARIZATION in [make_key("loss", n) for n in self.golden.names("loss")]:
            self.not_replayed[REGULARIZATION] = ("%s keeps no regularization losses: return \"loss/regularization\" "
                                                 "from the step to compare it" % self.keeps)
