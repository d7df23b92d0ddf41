"""What interception notes of a graph while the program builds it (optimizer.py, inputs.py), for
the analysis that reads the graph later (graph.py, found.py): graph -> its notes by kind.

- "loss": tensors handed to compute_gradients/minimize/get_gradients;
- "train_op": what minimize/apply_gradients returned; "slot": an optimizer's own variables;
- "gradient", "sparse": (variable name, its gradient), dense and IndexedSlices apart;
- "derivative": (variable name, gradient, the loss it was taken of);
- "clipped": (gradient, what tf.clip_by_global_norm made of it);
- "structure": (name, the structure inputs came in);
- "applied": paths.Applied, each variable's update as apply_gradients built it.
Python 3.7 syntax."""

from __future__ import annotations

import weakref
from typing import Any, Dict

_notes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
KINDS = ("loss", "train_op", "slot", "gradient", "sparse", "derivative", "clipped", "structure", "applied")


def note_intercepted(graph: Any, what: str, value: Any) -> None:
    notes = _notes.get(graph)
    if notes is None:
        notes = _notes[graph] = {kind: [] for kind in KINDS}
    notes[what].append(value)


def intercepted(graph: Any) -> Dict[str, list]:
    """A graph's notes by kind (empty lists for a graph nothing was noted of)."""
    return _notes.get(graph) or {kind: [] for kind in KINDS}
