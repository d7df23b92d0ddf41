"""Weight conversions into PyTorch's recurrent modules (replay/conversions.py: a conversion is
data, the same each way for values, gradients and optimizer state).

A TF1 `LSTMCell` keeps one kernel `(inputs + units, 4 units)` for input and state, its gates in
the order i, j, f, o, one bias, and adds `forget_bias` to the f gate at run time. torch's
`nn.LSTM` keeps `weight_ih` `(4 units, inputs)` and `weight_hh` `(4 units, units)`, the gates in
the order i, f, g, o, and two biases, `bias_ih` and `bias_hh`, added together. The golden's bias
goes into `bias_ih` (with the forget bias), `bias_hh` holds 0; read back, the two are summed. A
port that trains both biases moves their sum twice as far as TF1 moves its one bias: freeze
`bias_hh` at 0 (`requires_grad_(False)`) to train as TF1 did; otherwise the bias's gradient
shows twice TF1's.
"""

from __future__ import annotations

from typing import Any, List, Sequence

import numpy as np
import torch

from ..errors import UsageError
from ..replay.conversions import TO_KERAS, Arrays, Conversion, forget_offset, gates, lstm_variants, ungates
from .params import Param


def lstm(golden_scope: str, module: Any, forget_bias: float = 1.0, layer: int = 0) -> Conversion:
    """TF1 `LSTMCell`/`BasicLSTMCell` variables under `golden_scope` ("rnn/lstm_cell": kernel and
    bias) <-> layer `layer` of a torch `nn.LSTM` (or an `nn.LSTMCell`)."""
    suffix = "_l%d" % layer if isinstance(module, torch.nn.LSTM) else ""
    names = [n + suffix for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    tensors = [getattr(module, n, None) for n in names]
    if not isinstance(module, (torch.nn.LSTM, torch.nn.LSTMCell)) or tensors[0] is None:
        raise UsageError("tracekit.torch.lstm(%r, ...) takes an nn.LSTM (with layer=) or nn.LSTMCell, got %s"
                         % (golden_scope, type(module).__name__))
    if tensors[2] is None:
        raise UsageError("tracekit.torch.lstm(%r, ...): the torch LSTM has bias=False; TF1's LSTMCell always has a "
                         "bias" % golden_scope)
    if getattr(module, "proj_size", 0):
        raise UsageError("tracekit.torch.lstm(%r, ...): a projected torch LSTM (proj_size) is not TF1's LSTMCell "
                         "without num_proj" % golden_scope)
    units, scope = int(tensors[1].shape[1]), golden_scope.rstrip("/")
    # named here by torch's attribute only: the replay swaps in the model's own Params, named by their path
    params = tuple(Param("%s/%s" % (scope, n), n, t) for n, t in zip(names, tensors))

    def made(forget: float, order: Sequence[int]) -> Conversion:  # order: torch's gates i, f, g, o by default
        def to_port(golden: Arrays) -> List[np.ndarray]:
            g_kernel, g_bias = golden
            inputs = g_kernel.shape[0] - units
            k = gates(g_kernel, order)
            return [np.array(k[:inputs].T, order="C"), np.array(k[inputs:].T, order="C"), gates(g_bias, order),
                    np.zeros_like(g_bias)]

        def to_golden(port: Arrays) -> List[np.ndarray]:
            w_ih, w_hh, b_ih, b_hh = port
            kernel = ungates(np.concatenate([np.asarray(w_ih).T, np.asarray(w_hh).T], axis=0), order)
            return [kernel, ungates(np.asarray(b_ih) + np.asarray(b_hh), order)]

        return Conversion("TF1 LSTMCell %s -> torch %s" % (scope, type(module).__name__), (scope + "/kernel:0",
                          scope + "/bias:0"), params, to_port, to_golden,
                          (None, None, forget_offset(units, forget, order), None),
                          variants=lstm_variants(made, forget, order, "i, f, g, o"))
    return made(forget_bias, TO_KERAS)  # torch's gate order is Keras' (i, f, g, o)
