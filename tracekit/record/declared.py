"""What a user tells the recorder where the graph does not say it: the loss, learning rates,
train ops, and variables' gradients, by graph name (`tracekit record --loss NAME
--learning-rate NAME --train-op NAME --gradient VAR=TENSOR`, or the same keywords of
`tracekit.tf1.record`). A training step computed entirely by hand (its gradient written out,
not taken by tf.gradients) is one; so is a learning rate the recorder does not find.

Names are resolved in the recorded graph when a run is planned (the script builds its graph
after recording starts); a declared name the graph never holds is a warning in the golden.
No TensorFlow here: graphs are taken as given. Python 3.7 syntax."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from ..errors import UsageError


def _name(value: Any) -> str:
    """A tensor's or op's graph name, from itself or from a name."""
    name = getattr(value, "name", value)
    if not isinstance(name, str) or not name:
        raise UsageError("declare graph tensors and ops by name (or pass them): got %r" % (value,))
    return name


def _names(value: Any) -> Tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple, set)):
        return tuple(_name(v) for v in value)
    return (_name(value),)


@dataclass(frozen=True)
class Declared:
    losses: Tuple[str, ...] = ()
    learning_rates: Tuple[str, ...] = ()
    train_ops: Tuple[str, ...] = ()
    gradients: Tuple[Tuple[str, str], ...] = ()  # (variable name, its gradient tensor's name)

    @classmethod
    def of(cls, loss: Any = None, learning_rate: Any = None, train_op: Any = None,
           gradients: "Mapping[Any, Any] | Iterable[str] | None" = None) -> "Declared":
        """From the API's and the CLI's values: names or graph objects, one or a list; gradients
        as {variable: gradient} or "VAR=TENSOR" strings."""
        pairs: List[Tuple[str, str]] = []
        if isinstance(gradients, Mapping):
            pairs = [(_name(var), _name(grad)) for var, grad in gradients.items()]
        else:
            for text in gradients or ():
                var, sep, grad = str(text).partition("=")
                if not sep or not var or not grad:
                    raise UsageError("--gradient %r: write VARIABLE=GRADIENT, graph names such as w:0=grad_w:0"
                                     % (text,))
                pairs.append((var, grad))
        return cls(_names(loss), _names(learning_rate), _names(train_op),
                   tuple((_tensor(var), _tensor(grad)) for var, grad in pairs))

    def __bool__(self) -> bool:
        return bool(self.losses or self.learning_rates or self.train_ops or self.gradients)

    def to_meta(self) -> Dict[str, Any]:
        return {"losses": list(self.losses), "learning_rates": list(self.learning_rates),
                "train_ops": list(self.train_ops), "gradients": {var: grad for var, grad in self.gradients}}

    def names(self) -> List[str]:
        """Every graph name declared, as given."""
        return list(self.losses + self.learning_rates + self.train_ops) + [n for pair in self.gradients for n in pair]

    def missing(self, graph: Any) -> List[str]:
        """A warning for each name declared that `graph` (the recorded one, or None) does not hold:
        a typo, or another graph."""
        return ["declared %r is not in the recorded graph: check the name (tracekit show lists what was recorded; "
                "graph names look like 'dense/kernel:0')" % name for name in self.names()
                if graph is None or (find_tensor(graph, name) is None and find_op(graph, name) is None)]


def _tensor(name: str) -> str:
    """A tensor's name with its output index ("loss" -> "loss:0")."""
    return name if ":" in name else name + ":0"


def find_tensor(graph: Any, name: str) -> Optional[Any]:
    try:
        return graph.get_tensor_by_name(_tensor(name))
    except (KeyError, ValueError):
        return None


def find_op(graph: Any, name: str) -> Optional[Any]:
    try:
        return graph.get_operation_by_name(name.split(":")[0])
    except (KeyError, ValueError):
        return None
