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

import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import ReplayError, UsageError
from . import varmap

Arrays = Sequence[np.ndarray]

# What a conversion's variants name (judge/variants.py replays a failing step with each).
FORGET_BIAS = "lstm-forget-bias"
GATE_ORDER = "lstm-gate-order"


def _no_variants() -> Tuple["Variant", ...]:
    return ()


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
    # The ways this conversion is commonly got wrong, each as the conversion that does it the other
    # way: a failing step replayed with one of them in its place that matches names the slip.
    variants: Callable[[], Tuple["Variant", ...]] = field(default=_no_variants)

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


@dataclass(frozen=True, eq=False)
class Variant:
    """A conversion done another way: `code` names the convention (FORGET_BIAS, ...), `port`
    says what the port's conversion does, `other` what `conversion` does instead."""

    code: str
    port: str
    other: str
    conversion: Conversion


def lstm_variants(make: Callable[[float, Sequence[int]], Conversion], forget_bias: float,
                  order: Sequence[int], port_order: str) -> Callable[[], Tuple[Variant, ...]]:
    """An LSTM conversion's variants: the other forget bias (1 where it is 0, else 0), and TF1's
    gate blocks loaded in their own order (i, j, f, o) as the port's (`port_order`), the forget
    bias on TF1's f block; make(forget_bias, order) builds a conversion (order: the TF1 block of
    each of the port's blocks)."""
    def variants() -> Tuple[Variant, ...]:
        other = 0.0 if forget_bias else 1.0
        out = [Variant(FORGET_BIAS, "adds forget_bias=%g to the f gate" % forget_bias,
                       "adds %g (TF1's LSTMCell adds its forget_bias, 1 by default, at run time; Keras' LSTM and the "
                       "cuDNN cells add none): give the conversion the TF1 cell's forget_bias" % other,
                       make(other, order))]
        if tuple(order) != (0, 1, 2, 3):
            out.append(Variant(GATE_ORDER, "reorders TF1's gate blocks i, j, f, o as the port's %s" % port_order,
                               "keeps them in TF1's order: the port's cell splits its gates as TF1's code does (i, j, "
                               "f, o), not in %s; split them as its layer's weights are laid out" % port_order,
                               make(forget_bias, (0, 1, 2, 3))))
        return tuple(out)
    return variants


def gates(array: np.ndarray, order: Sequence[int]) -> np.ndarray:
    """Reorder the four equal blocks of the last axis."""
    blocks = np.split(array, 4, axis=-1)
    return np.concatenate([blocks[i] for i in order], axis=-1)


def ungates(array: np.ndarray, order: Sequence[int]) -> np.ndarray:
    """gates()'s inverse: the blocks put back where `order` took them from."""
    return gates(array, [int(i) for i in np.argsort(order)])


# TF1 gate blocks (i, j, f, o) in Keras' order (i, f, c, o): Keras block k is TF1 block TO_KERAS[k].
TO_KERAS = (0, 2, 1, 3)


def forget_offset(units: int, forget_bias: float, order: Sequence[int]) -> np.ndarray:
    """The constant a port's LSTM bias holds and TF1's does not: `forget_bias` on the port's
    block that holds TF1's f block (2), where TF1 adds it at run time."""
    offset = np.zeros(4 * units, dtype=np.float32)
    at = list(order).index(2)
    offset[at * units:(at + 1) * units] = forget_bias
    return offset


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
    units, scope = int(recurrent.shape[0]), golden_scope.rstrip("/")
    peephole = "the TF1 cell has peephole connections (use_peepholes=True), which Keras LSTM lacks"
    projection = "the TF1 cell projects its output (num_proj), which Keras LSTM cannot"
    refused = tuple((scope + "/%s:0" % v, peephole) for v in ("w_f_diag", "w_i_diag", "w_o_diag")) + \
        ((scope + "/projection/kernel:0", projection),)

    def made(forget: float, order: Sequence[int]) -> Conversion:
        def to_port(golden: Arrays) -> List[np.ndarray]:
            g_kernel, g_bias = golden
            inputs = g_kernel.shape[0] - units
            k = gates(g_kernel, order)
            return [np.ascontiguousarray(k[:inputs]), np.ascontiguousarray(k[inputs:]), gates(g_bias, order)]

        def to_golden(port: Arrays) -> List[np.ndarray]:
            p_kernel, p_recurrent, p_bias = port
            return [ungates(np.concatenate([p_kernel, p_recurrent], axis=0), order), ungates(p_bias, order)]

        return Conversion("TF1 LSTMCell %s -> Keras LSTM %s" % (scope, getattr(port_layer, "name", "?")),
                          (scope + "/kernel:0", scope + "/bias:0"), (kernel, recurrent, bias), to_port, to_golden,
                          (None, None, forget_offset(units, forget, order)), refused,
                          lstm_variants(made, forget, order, "i, f, c, o"))
    return made(forget_bias, TO_KERAS)


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
    """One golden variable <-> one port variable (or its name, found among the replay's
    variables) holding the golden's elements transposed by
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
    port_name = port_variable if isinstance(port_variable, str) else getattr(port_variable, "name", "?")
    return Conversion("%s -> %s %s" % (golden_name, what, port_name), (golden_name,), (port_variable,), to_port,
                      to_golden)


PARTITION_STRATEGIES = ("div", "mod")


def partitioned(golden_names: Sequence[str], port_variable: Any, strategy: str = "div") -> Conversion:
    """TF1 partitions of one variable (`<var>/part_0:0`, `part_1`, ..., in this order), split along
    the first axis as TF1's partitioners split, <-> one port variable holding the whole. Which
    rows each partition holds is the lookup's `partition_strategy`: "div" (contiguous blocks:
    feature columns, TF2's lookups, the whole variable read at once) or "mod" (row r in
    partition r % n: TF1's `tf.nn.embedding_lookup` default). A replay makes the "div" conversion
    itself for a golden variable in several partitions whose whole shape matches a port
    variable; one partition alone maps by name."""
    if strategy not in PARTITION_STRATEGIES:
        raise UsageError("partitioned(..., strategy=%r): use 'div' or 'mod', the partition_strategy of the TF1 "
                         "lookups" % (strategy,))
    names = tuple(golden_names)
    rows: List[int] = []  # each partition's rows, from the golden's shapes (bind's probe)

    def to_port(golden: Arrays) -> List[np.ndarray]:
        rows[:] = [int(part.shape[0]) for part in golden]
        if strategy == "div":
            return [np.concatenate(list(golden), axis=0)]
        whole = np.empty((sum(rows),) + golden[0].shape[1:], dtype=golden[0].dtype)
        for k, part in enumerate(golden):
            whole[k::len(golden)] = part
        return [whole]

    def to_golden(port: Arrays) -> List[np.ndarray]:
        if strategy == "div":
            return [np.ascontiguousarray(part) for part in np.split(port[0], np.cumsum(rows)[:-1], axis=0)]
        return [np.ascontiguousarray(port[0][k::len(rows)]) for k in range(len(rows))]

    var = varmap.PARTITION.match(names[0])
    scope = var.group("var") if var else names[0]
    return Conversion("TF1 %s in %d partitions (%s) -> %s" % (scope, len(names), strategy,
                                                              getattr(port_variable, "name", "?")),
                      names, (port_variable,), to_port, to_golden)


def partition_groups(golden: Sequence[Tuple[str, Tuple[int, ...]]]) -> Dict[str, List[Tuple[str, Tuple[int, ...]]]]:
    """"<var>:0" -> its partitions (name, shape) in order, for each golden variable held in
    several partitions along its first axis (part_0 ... part_<n-1>, the other axes alike)."""
    found: Dict[str, Dict[int, Tuple[str, Tuple[int, ...]]]] = {}
    for name, shape in golden:
        part = varmap.PARTITION.match(name)
        if part:
            found.setdefault(part.group("var") + ":0", {})[int(part.group("index"))] = (name, tuple(shape))
    out = {}
    for whole, parts in found.items():
        ordered = [parts[i] for i in range(len(parts)) if i in parts]
        if len(ordered) > 1 and len(ordered) == len(parts) and all(
                len(shape) >= 1 and shape[1:] == ordered[0][1][1:] for _, shape in ordered):
            out[whole] = ordered
    return out


def carried_conversions(var_map: Any) -> Tuple[Any, List[Conversion]]:
    """A var_map whose values may be conversions ({"output_weights:0": transpose(...)}, or a rule
    `(r"^output_weights:0$", transpose(...))`) -> (the var_map without them, the conversions);
    each must convert the variable it is given for (a rule: a variable its pattern matches)."""
    if isinstance(var_map, dict):
        carried = [(name, conv) for name, conv in var_map.items() if isinstance(conv, Conversion)]
        for name, conv in carried:
            if name not in conv.golden:
                raise UsageError("var_map[%r] is the conversion %s, which converts %s: give it as the value of (one "
                                 "of) the golden variables it converts" % (name, conv.describe, ", ".join(conv.golden)))
        rest: Any = {name: value for name, value in var_map.items() if not isinstance(value, Conversion)}
    elif isinstance(var_map, (list, tuple)):
        carried = [(pattern, conv) for pattern, conv in var_map if isinstance(conv, Conversion)]
        for pattern, conv in carried:
            if not any(re.search(pattern, name) for name in conv.golden):
                raise UsageError("var_map's rule %r is the conversion %s, which converts %s: give it a pattern that "
                                 "matches (one of) the golden variables it converts"
                                 % (pattern, conv.describe, ", ".join(conv.golden)))
        rest = [(pattern, value) for pattern, value in var_map if not isinstance(value, Conversion)]
    else:
        return var_map, []
    return rest, list({id(conv): conv for _, conv in carried}.values())


def by_names(conversions: Sequence[Conversion], variables: Dict[str, Any]) -> List[Conversion]:
    """The conversions with each port variable given by its name (a proposed var_map's
    transpose("w:0", "dense/kernel:0")) replaced by that variable of `variables` (name -> it)."""
    out = []
    for conv in conversions:
        named = [p for p in conv.port if isinstance(p, str)]
        if not named:
            out.append(conv)
            continue
        missing = [p for p in named if p not in variables and p + ":0" not in variables]
        if missing:
            raise UsageError("conversion %s names the port variable %s, which is not among the TF2 variables (%s)"
                             % (conv.describe, ", ".join(missing), ", ".join(sorted(variables)[:8])))
        port = tuple(variables.get(p, variables.get(p + ":0")) if isinstance(p, str) else p for p in conv.port)
        out.append(replace(conv, port=port))
    return out


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
    cell's kernel (inputs + units, blocks * units) and a Keras recurrent kernel (units, blocks' *
    units); a TF1 variable held in partitions."""
    recurrent = [(n[:-2] if n.endswith(":0") else n, tuple(s)) for n, s in port]
    recurrent = [(n, s) for n, s in recurrent if n.endswith("recurrent_kernel") and len(s) == 2]
    hints = []
    for whole, parts in partition_groups(golden).items():
        shape = (sum(s[0] for _, s in parts),) + parts[0][1][1:]
        hints.append("%s is held in %d TF1 partitions, %s as a whole: a TF2 variable of that shape named like it is "
                     "converted without being asked; else pass convert=[tracekit.tf2.partitioned([<its %d partitions' "
                     "names>], <the TF2 variable>)]" % (whole[:-2], len(parts), shape, len(parts)))
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
