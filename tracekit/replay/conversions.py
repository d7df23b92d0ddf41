"""Weight conversions: golden variables that a port holds in another layout.

A TF1 `LSTMCell` keeps one kernel for input and state and its gates in the order
i, j, f, o, and adds `forget_bias` to the f gate at run time. Keras `LSTM` keeps
a kernel and a recurrent kernel, the gates in the order i, f, c, o, and no
forget bias. Same model, other variables. A Conversion relates several golden
variables to several port variables in two parts:
- a rearrangement of elements (split, concatenate, reorder, transpose), the same
  each way for values, gradients and optimizer slots (a slot such as Adam's is
  elementwise, so it moves with its variable's elements);
- a constant the port's values carry and the golden's do not (the forget bias),
  added to values only, never to gradients or slots.
The replay loads converted values into the port and captures the port's values,
gradients and slots converted back, so the comparison happens in the golden's
names and shapes. No TensorFlow here: port variables are taken as given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import ReplayError, UsageError

Arrays = Sequence[np.ndarray]


@dataclass(frozen=True, eq=False)
class Conversion:
    """Golden variables (by name) <-> port variables (objects), in `describe`'s terms."""

    describe: str  # e.g. "TF1 LSTMCell rnn/lstm_cell -> Keras LSTM lstm"
    golden: Tuple[str, ...]
    port: Tuple[Any, ...]
    to_port: Callable[[Arrays], List[np.ndarray]]  # a rearrangement: golden layout -> port layout
    to_golden: Callable[[Arrays], List[np.ndarray]]  # its inverse
    port_offset: Tuple[Optional[np.ndarray], ...] = ()  # per port variable, added to values only
    # Golden variables the port cannot express, with why: their presence refuses the conversion.
    refused: Tuple[Tuple[str, str], ...] = ()

    def values_to_port(self, golden: Arrays) -> List[np.ndarray]:
        out = self.to_port(golden)
        return [v if off is None else (v + off).astype(v.dtype) for v, off in zip(out, self._offsets())]

    def values_to_golden(self, port: Arrays) -> List[np.ndarray]:
        plain = [v if off is None else (v - off).astype(v.dtype) for v, off in zip(port, self._offsets())]
        return self.to_golden(plain)

    def deltas_to_port(self, golden: Arrays) -> List[np.ndarray]:
        """Gradients and optimizer slots: rearranged, no offset."""
        return self.to_port(golden)

    def deltas_to_golden(self, port: Arrays) -> List[np.ndarray]:
        return self.to_golden(port)

    def _offsets(self) -> Tuple[Optional[np.ndarray], ...]:
        return self.port_offset or (None,) * len(self.port)


def _gates(array: np.ndarray, order: Sequence[int]) -> np.ndarray:
    """Reorder the four equal blocks of the last axis."""
    blocks = np.split(array, 4, axis=-1)
    return np.concatenate([blocks[i] for i in order], axis=-1)


# TF1 gate blocks (i, j, f, o) in Keras' order (i, f, c, o): Keras block k is TF1 block ORDER[k].
_TO_KERAS = (0, 2, 1, 3)
_TO_TF1 = (0, 2, 1, 3)  # the permutation swaps two blocks: it is its own inverse


def lstm(golden_scope: str, port_layer: Any, forget_bias: float = 1.0) -> Conversion:
    """TF1 `LSTMCell`/`BasicLSTMCell` variables under `golden_scope` ("rnn/lstm_cell":
    kernel and bias) <-> a Keras `LSTM` layer or `LSTMCell` (kernel, recurrent_kernel,
    bias). `forget_bias` is the TF1 cell's (1.0 by default); the Keras layer must use a
    bias, sigmoid gates and tanh activations, as TF1's cell does. A cell with peepholes or
    a projection is refused: Keras LSTM has neither."""
    cell = getattr(port_layer, "cell", port_layer)
    kernel, recurrent, bias = (getattr(cell, a, None) for a in ("kernel", "recurrent_kernel", "bias"))
    if kernel is None or recurrent is None:
        raise UsageError("lstm(%r, ...): the port layer has no kernel and recurrent_kernel: pass a built Keras "
                         "LSTM layer or LSTMCell (call the model once first)" % golden_scope)
    if bias is None:
        raise UsageError("lstm(%r, ...): the Keras LSTM has use_bias=False; TF1's LSTMCell always has a bias"
                         % golden_scope)
    units = int(recurrent.shape[0])
    offset = np.zeros(4 * units, dtype=np.float32)
    offset[units:2 * units] = forget_bias  # Keras' f block: TF1 adds forget_bias there at run time
    scope = golden_scope.rstrip("/")

    def to_port(golden: Arrays) -> List[np.ndarray]:
        g_kernel, g_bias = golden
        inputs = g_kernel.shape[0] - units
        k = _gates(g_kernel, _TO_KERAS)
        return [np.ascontiguousarray(k[:inputs]), np.ascontiguousarray(k[inputs:]), _gates(g_bias, _TO_KERAS)]

    def to_golden(port: Arrays) -> List[np.ndarray]:
        p_kernel, p_recurrent, p_bias = port
        return [_gates(np.concatenate([p_kernel, p_recurrent], axis=0), _TO_TF1), _gates(p_bias, _TO_TF1)]

    peephole = "the TF1 cell has peephole connections (use_peepholes=True), which Keras LSTM lacks"
    projection = "the TF1 cell projects its output (num_proj), which Keras LSTM cannot"
    refused = tuple((scope + "/%s:0" % v, peephole) for v in ("w_f_diag", "w_i_diag", "w_o_diag")) + \
        ((scope + "/projection/kernel:0", projection),)
    return Conversion("TF1 LSTMCell %s -> Keras LSTM %s" % (scope, getattr(port_layer, "name", "?")),
                      (scope + "/kernel:0", scope + "/bias:0"), (kernel, recurrent, bias), to_port, to_golden,
                      (None, None, offset), refused)


def gru(golden_scope: str, port_layer: Any) -> Conversion:
    """TF1 `GRUCell` variables under `golden_scope` ("rnn/gru_cell": gates/kernel, gates/bias,
    candidate/kernel, candidate/bias) <-> a Keras `GRU` layer or `GRUCell` built with
    reset_after=False. TF1's cell applies the reset gate to the state before the candidate's
    matmul; Keras' reset_after=True (its default) applies it after, which is another model."""
    cell = getattr(port_layer, "cell", port_layer)
    if getattr(cell, "reset_after", False):
        raise UsageError("gru(%r, ...): the Keras GRU has reset_after=True, which applies the reset gate after "
                         "the recurrent matmul; TF1's GRUCell applies it before. Build the port with "
                         "GRU(..., reset_after=False)" % golden_scope)
    kernel, recurrent, bias = (getattr(cell, a, None) for a in ("kernel", "recurrent_kernel", "bias"))
    if kernel is None or recurrent is None or bias is None:
        raise UsageError("gru(%r, ...): pass a built Keras GRU layer or GRUCell with a bias (call the model "
                         "once first)" % golden_scope)
    units = int(recurrent.shape[0])
    scope = golden_scope.rstrip("/")

    def to_port(golden: Arrays) -> List[np.ndarray]:
        gates_k, gates_b, cand_k, cand_b = golden
        inputs = gates_k.shape[0] - units
        r, z = gates_k[:, :units], gates_k[:, units:]  # TF1 splits its gates into r, u; Keras' z is u
        both = np.concatenate([z, r, cand_k], axis=1)  # Keras' column order: z, r, h
        return [np.ascontiguousarray(both[:inputs]), np.ascontiguousarray(both[inputs:]),
                np.concatenate([gates_b[units:], gates_b[:units], cand_b])]

    def to_golden(port: Arrays) -> List[np.ndarray]:
        p_kernel, p_recurrent, p_bias = port
        both = np.concatenate([p_kernel, p_recurrent], axis=0)
        z, r, h = np.split(both, 3, axis=1)
        bz, br, bh = np.split(p_bias, 3)
        return [np.concatenate([r, z], axis=1), np.concatenate([br, bz]), np.ascontiguousarray(h), bh]

    names = tuple("%s/%s:0" % (scope, v) for v in ("gates/kernel", "gates/bias", "candidate/kernel", "candidate/bias"))
    return Conversion("TF1 GRUCell %s -> Keras GRU %s" % (scope, getattr(port_layer, "name", "?")), names,
                      (kernel, recurrent, bias), to_port, to_golden)


def transpose(golden_name: str, port_variable: Any, axes: Optional[Sequence[int]] = None,
              shape: Optional[Sequence[int]] = None) -> Conversion:
    """One golden variable <-> one port variable holding the golden's elements transposed by
    `axes` (numpy's order; None reverses them), then reshaped to `shape` (None: as they are).
    A dense kernel (in, out) held as a 1x1 convolution: axes=(0, 1), shape=(1, 1, in, out)."""
    order = None if axes is None else tuple(axes)
    seen: Dict[str, Tuple[int, ...]] = {}  # the golden's shape, from the first conversion (bind's probe)

    def to_port(golden: Arrays) -> List[np.ndarray]:
        value = np.transpose(golden[0], order)
        seen["transposed"] = value.shape
        return [np.ascontiguousarray(value.reshape(shape) if shape is not None else value)]

    def to_golden(port: Arrays) -> List[np.ndarray]:
        value = port[0].reshape(seen["transposed"]) if shape is not None else port[0]
        inverse = None if order is None else tuple(int(i) for i in np.argsort(order))
        return [np.ascontiguousarray(np.transpose(value, inverse))]

    what = "transposed" + ("" if order is None else " %s" % (order,)) + ("" if shape is None else
                                                                          ", reshaped to %s" % (tuple(shape),))
    return Conversion("%s -> %s %s" % (golden_name, what, getattr(port_variable, "name", "?")),
                      (golden_name,), (port_variable,), to_port, to_golden)


def bind(conversions: Sequence[Conversion], golden_shapes: Dict[str, Tuple[int, ...]],
         port_shape: Callable[[Any], Tuple[int, ...]]) -> None:
    """Check each conversion against the golden and the port before anything is loaded: every
    golden variable exists, and converting the golden's shapes gives the port's."""
    for conv in conversions:
        for name, why in conv.refused:
            if name in golden_shapes:
                raise ReplayError("conversion %s: %s (the golden has %s). Port the cell as a custom layer "
                                  "holding the golden's variables, mapped with var_map=" % (conv.describe, why, name))
        missing = [name for name in conv.golden if name not in golden_shapes]
        if missing:
            raise ReplayError("conversion %s: the golden has no %s (it has: %s)"
                              % (conv.describe, ", ".join(missing), ", ".join(sorted(golden_shapes)[:12])))
        probe = conv.to_port([np.zeros(golden_shapes[n], np.float32) for n in conv.golden])
        want = [port_shape(v) for v in conv.port]
        got = [tuple(p.shape) for p in probe]
        if got != want:
            raise ReplayError("conversion %s: the golden's %s convert to shapes %s, the port's variables have %s"
                              % (conv.describe, ", ".join("%s %s" % (n, golden_shapes[n]) for n in conv.golden),
                                 got, want))


# (golden kernel suffix, its gate blocks, the Keras recurrent kernel's blocks, the hint's cell,
# layer and conversion) of each recurrent pair `suggest` recognizes.
_RECURRENT = (
    ("/gates/kernel:0", 2, 3, "GRUCell", "GRU", 'gru("%s", <that Keras GRU layer, built with reset_after=False>)'),
    ("/kernel:0", 4, 4, "LSTMCell", "LSTM", 'lstm("%s", <that Keras LSTM layer>)'),
)


def suggest(golden: Sequence[Tuple[str, Tuple[int, ...]]], port: Sequence[Tuple[str, Tuple[int, ...]]]) -> List[str]:
    """Conversions that would fit the golden and port variables a mapping left unpaired: a TF1
    cell's kernel (inputs + units, blocks * units) and a Keras recurrent kernel (units, blocks' * units)."""
    recurrent = [(n[:-2] if n.endswith(":0") else n, tuple(s)) for n, s in port]
    recurrent = [(n, s) for n, s in recurrent if n.endswith("recurrent_kernel") and len(s) == 2]
    hints = []
    for name, shape in golden:
        for suffix, blocks, port_blocks, cell, layer, call in _RECURRENT:
            if not name.endswith(suffix) or len(shape) != 2 or shape[1] % blocks:
                continue
            units, scope = shape[1] // blocks, name[:-len(suffix)]
            hints.extend('%s looks like a TF1 %s and %s like a Keras %s: pass convert=[tracekit.tf2.%s]'
                         % (scope, cell, port_name.rpartition("/")[0], layer, call % scope)
                         for port_name, port_shape in recurrent if port_shape == (units, port_blocks * units))
            break  # "/gates/kernel:0" is also a "/kernel:0": the first suffix that fits decides
    return hints
