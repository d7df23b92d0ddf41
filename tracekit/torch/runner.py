"""The PyTorch runner: replays a golden through a PyTorch training step (replay/loop.py's
Runner). It pairs the module's parameters and buffers with the golden's variables (params.py
names and lays them out as TF does; replay/variables.py pairs them), loads the initial state,
and for each step installs the random tape (tape.py), the optimizer's hooks (optim.py) and the
`tracekit.tap` sink, then reads the state after it.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any, Collection, Dict, Iterator, List, Mapping, Sequence, Tuple

import numpy as np
import torch

from .. import taps
from ..errors import ReplayError, UsageError
from ..keys import UNCLIPPED, make_key, split_key
from ..replay import varmap
from ..replay.conversions import carried_conversions
from ..replay.options import ReplayOptions
from ..replay.port_runner import Captured, PortRunner
from ..replay.slots import golden_state, inert_slots
from ..replay.variables import pair_port
from .optim import OptimizerBridge
from .params import Param, by_tensor, module_params
from .tape import Tape


def _port_var_map(var_map: Any, params: Sequence[Param]) -> Any:
    """The var_map with torch's names (`hidden.weight`), TF's names for them (`hidden/kernel`, or
    `hidden/weights:0` as a rule rewriting the golden's names leaves them) and tensors as targets
    turned into the Params pairing sees."""
    if var_map in (None, "auto"):
        return var_map
    dotted = {p.dotted: p for p in params}
    scoped = {varmap.parts(p.name): p for p in params}  # TF's name for it, as a rule may write it
    tensors = by_tensor(list(params))

    def target(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            found = tensors.get(id(value))
            if found is None:
                raise UsageError("var_map names a tensor that is not among the model's parameters and buffers")
            return found
        if isinstance(value, str):
            return dotted.get(value) or scoped.get(varmap.parts(value)) or value
        return value
    if isinstance(var_map, dict):
        return {name: target(value) for name, value in var_map.items()}
    return lambda name: target(varmap.explicit_target(var_map, name))


class TorchRunner(PortRunner):
    """The PyTorch side of one replay."""

    keeps = "a PyTorch module"

    def __init__(self, golden: Any, options: ReplayOptions, optimizers: Sequence[Any]) -> None:
        if options.model is None:
            raise UsageError("tracekit.torch needs the port's model: model=<torch.nn.Module>")
        self.golden = golden
        split = golden_state(golden, "PyTorch", "PyTorch")
        self.not_replayed: Dict[str, str] = dict(split.not_replayed)
        self.model = options.model
        params = module_params(options.model)
        own = by_tensor(params)  # a conversion's tensors as the model names them (and pairing leaves them out)
        var_map, carried = carried_conversions(options.var_map)  # conversions given in the var_map
        convert = [replace(conv, port=tuple(own.get(id(getattr(p, "tensor", p)), p) for p in conv.port))
                   for conv in list(options.convert) + carried]
        paired = pair_port(golden, params, _port_var_map(var_map, params), convert,
                           split.model_names, split.slots, split.iterations, split.keys)
        # the golden's state the port holds in its module (a step counter kept as a buffer), forced as a variable
        self.conversions, self.mapping, self.port_state = paired.conversions, paired.mapping, paired.state
        self.not_replayed.update(paired.not_replayed)
        inert = inert_slots(golden, paired.slots)  # slots that change nothing: a torch optimizer keeps none
        self.not_replayed.update((make_key("slot", name), why) for name, why in inert.items())
        slots = [slot for slot in paired.slots if slot.name not in inert]
        mapped = {name: cand.obj for name, cand in self.mapping.pairs.items()}
        self.optimizer = OptimizerBridge(optimizers, mapped, slots, paired.iterations, golden.names("lr"),
                                         golden.names("grad"), golden, load_initial=options.init == "golden",
                                         conversions=self.conversions)
        self.tape = Tape(inject=options.random == "tape")
        self._init_shared()

    # ---- a step -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def step(self, index: int, draws: List[Tuple[str, np.ndarray]], first: bool, full: bool = True,
             counters: Mapping[str, int] = {}, digested: Collection[str] = ()) -> Iterator[Captured]:
        self._step_index = index
        self._unfed_reads(index, counters)
        self._captured = captured = Captured()
        self.tape.start(index, draws)
        with self.tape.installed(), self.optimizer.installed(first), taps.capturing(self._tap):
            yield captured
        captured.values.update(self.optimizer.values)
        captured.draws = list(self.tape.taken)
        if not full:
            captured.values = {k: v for k, v in captured.values.items() if split_key(k)[0] in ("loss", "lr")}

    def check_step(self, index: int, updated: Sequence[str]) -> None:
        self.tape.check(index)
        if index == 0:
            mapped = [name for name in updated if name in self.mapping.pairs]
            missing = [name for name in mapped if make_key("grad", name) not in self._captured.values]
            if missing and not self.optimizer.applies:
                raise ReplayError("step 0: the port's optimizer took no step (pass optimizer= the torch.optim "
                                  "optimizer(s) the step function calls .step() on, or return it from make_port as "
                                  "{\"optimizer\": ...})")
            unpaired = self.optimizer.unpaired(mapped)
            if unpaired:
                raise ReplayError("step %d: the golden's optimizer state has no counterpart in the port's optimizer "
                                  "state (tracekit pairs them by role: %s):\n  %s"
                                  % (index, "exp_avg/exp_avg_sq, momentum_buffer, square_avg, sum, ...",
                                     "\n  ".join(unpaired)))
            for name in missing:
                self.not_replayed.setdefault(make_key("grad", name), "the port's optimizer holds no gradient for it")
            for name in self.golden.names("grad"):  # what TF1 clipped: seen only where the port clips so
                key = make_key("grad", name)
                if name.endswith(UNCLIPPED) and key not in self._captured.values:
                    self.not_replayed.setdefault(key, "the port's step did not clip these gradients with "
                                                      "torch.nn.utils.clip_grad_norm_ (called by that name)")
            self.not_replayed.update(self.optimizer.uncounted())

    def _tap(self, name: str, tensor: Any) -> Any:
        if not isinstance(tensor, torch.Tensor):
            return tensor
        self._captured.values[make_key("tap", name)] = tensor.detach().cpu().numpy().copy()
        if self._forced_taps is None:
            return tensor
        value = self._forced_taps.get(name)
        if value is None or tuple(np.shape(value)) != tuple(tensor.shape):
            raise ReplayError("forcing='taps': the port taps %r at step %d as %s; the golden holds %s there"
                              % (name, self._step_index, tuple(tensor.shape),
                                 "no such tap" if value is None else tuple(np.shape(value))))
        forced = torch.from_numpy(np.asarray(value, dtype=tensor.detach().cpu().numpy().dtype)).to(tensor.device)
        return forced + (tensor - tensor.detach())  # the golden's value forward, the port's gradient backward

    def meta(self) -> Dict[str, Any]:
        return {"own_initial": sorted(self._own_named.union(self.optimizer.own_initial)),
                "applies": self.optimizer.first_applies,
                "reshaped_draws": dict(self.tape.reshaped), "draw_rates": dict(self.tape.rates),
                "counter_reads": dict(self._counter_reads),
                "loaded": {"read_back": sorted(k for k, ok in self.optimizer.loaded.items() if ok),
                           "otherwise": sorted(k for k, ok in self.optimizer.loaded.items() if not ok)}}
