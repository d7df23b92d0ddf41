"""Weight conversions into flax's recurrent cells (replay/conversions.py: a conversion is data,
the same each way for values, gradients and optimizer state).

A TF1 `LSTMCell` keeps one kernel `(inputs + units, 4 units)` for input and state, its gates in
the order i, j, f, o, one bias, and adds `forget_bias` to the f gate at run time. flax's
`LSTMCell` (and `OptimizedLSTMCell`) keeps a Dense per gate and side: `ii`, `if`, `ig`, `io` on
the input (no bias) and `hi`, `hf`, `hg`, `ho` on the state (with the bias), the gates named
i, f, g, o. The golden's bias goes into the `h*` biases, the forget bias into `hf`'s.
"""

from __future__ import annotations

from typing import Any, List, Sequence

import numpy as np

from ..replay.conversions import Arrays, Conversion, lstm_variants

_FLAX = "ifgo"  # flax's gates; TF1's block of each: i 0, f 2, g (TF1's j) 1, o 3
_TF1_BLOCK = (0, 2, 1, 3)


def lstm(golden_scope: str, cell: str, forget_bias: float = 1.0) -> Conversion:
    """TF1 `LSTMCell`/`BasicLSTMCell` variables under `golden_scope` ("rnn/lstm_cell": kernel and
    bias) <-> the flax LSTM cell at path `cell` of the train state ("params/LSTMCell_0": what
    `nn.RNN(nn.LSTMCell(units))` makes, or the cell's own name)."""
    path = cell.strip("/")
    names = (["%s/i%s/kernel" % (path, g) for g in _FLAX] + ["%s/h%s/kernel" % (path, g) for g in _FLAX]
             + ["%s/h%s/bias" % (path, g) for g in _FLAX])
    scope = golden_scope.rstrip("/")

    def made(forget: float, order: Sequence[int]) -> Conversion:  # order: flax gate k holds TF1's block order[k]
        def to_port(golden: Arrays) -> List[np.ndarray]:
            kernel, bias = (np.asarray(a) for a in golden)
            units = kernel.shape[1] // 4
            inputs = kernel.shape[0] - units
            blocks, biases = np.split(kernel, 4, axis=1), np.split(bias, 4)
            ordered = [blocks[k] for k in order]
            return ([np.array(b[:inputs]) for b in ordered] + [np.array(b[inputs:]) for b in ordered]
                    + [np.array(biases[k]) for k in order])

        def to_golden(port: Arrays) -> List[np.ndarray]:
            arrays = [np.asarray(a) for a in port]
            tf1 = [(arrays[k], arrays[4 + k], arrays[8 + k]) for k in (list(order).index(b) for b in range(4))]
            kernel = np.concatenate([np.concatenate([wx, wh], axis=0) for wx, wh, _ in tf1], axis=1)
            return [kernel, np.concatenate([b for _, _, b in tf1])]

        offset: List[Any] = [None] * 12
        offset[8 + list(order).index(2)] = np.float32(forget)  # TF1 adds it to the f gate at run time
        # the port's leaves by their paths: the replay puts the train state's own leaves in their place
        return Conversion("TF1 LSTMCell %s -> flax LSTMCell %s" % (scope, path),
                          (scope + "/kernel:0", scope + "/bias:0"), tuple(names), to_port, to_golden, tuple(offset),
                          variants=lstm_variants(made, forget, order, "i, f, g, o"))
    return made(forget_bias, _TF1_BLOCK)
