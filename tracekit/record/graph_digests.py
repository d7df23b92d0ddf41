"""Digests made in the recorded graph between keyframes (digest_ops.py says what and how), so
that such a step copies only its digests out of the session, not every variable, gradient and
slot. The ops are added once per tensor, under SCOPE, to a finalized graph too; a tensor that
cannot be digested there is fetched and digested in numpy, and the light kinds, which a golden
keeps whole, are fetched as they are. Python 3.7 syntax.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..digest_ops import Made, digest_ops, disagreement
from ..keys import LIGHT_KINDS, split_key

SCOPE = "tracekit_digest"


class GraphDigests:
    """The digest ops of one graph's tensors, made once each. `unusable` says why none are made
    in this graph (ops could not be added to it, or one disagreed with numpy's digest), after
    which everything is fetched."""

    def __init__(self, tf: Any, graph: Any) -> None:
        self._tf = tf
        self.graph = graph
        # (tensor or variable name, with the careful branch) -> its ops (None: fetched)
        self._made: Dict[Tuple[str, bool], Optional[Made]] = {}
        self.unusable: Optional[str] = None
        self._checked = False  # a digest made here held against numpy's (the first read)
        self.said = False  # the recorder warned why none are made here

    def swap(self, fetches: Mapping[str, Any], careful: bool = True) -> Tuple[Dict[str, Any], Dict[str, Made]]:
        """`fetches` (key -> tensor or variable) with each tensor that can be digested here
        replaced by its digest's ops; and those keys' Made. The light kinds (inputs, draws,
        losses, learning rates) stay: a golden keeps them whole at every step. Without the
        careful branch (variables, which `read` reads again where its digest cannot stand)."""
        heavy = {key: tensor for key, tensor in fetches.items() if split_key(key)[0] not in LIGHT_KINDS}
        made = self._make(self.graph, list(heavy.values()), careful)
        out: Dict[str, Any] = {}
        swapped: Dict[str, Made] = {}
        for key, tensor in fetches.items():
            ops = made.get(_name(tensor)) if key in heavy else None
            if ops is None:
                out[key] = tensor
            else:
                out[key] = (ops.stats, ops.sample)
                swapped[key] = ops
        return out, swapped

    def read(self, sess: Any, run: Any, variables: List[Tuple[str, Any]]) -> List[Tuple[str, Any, Any]]:
        """The variables' values now (state.Read), each that can be digested here as its Digest;
        one whose digest cannot stand (a NaN, an Inf, squares out of range) read again whole.
        The first read also fetches its smallest digested variable whole and holds the digest
        made here against numpy's (digest_ops.disagreement): where they disagree, no digest is
        made in this graph again (`unusable` says why) and this read is of values."""
        if not variables:
            return []
        fetches, made = self.swap(dict(variables), careful=False)
        listed = [fetches[key] for key, _ in variables]
        probe = None if self._checked or not made else min(made, key=lambda key: made[key].count)
        values = run(sess, listed + [dict(variables)[probe]] if probe else listed)
        if probe is not None:
            whole = values.pop()
            made_here = made[probe].digest(*values[[key for key, _ in variables].index(probe)])
            self._checked = made_here is not None  # else a later read checks
            why = None if made_here is None else disagreement(made_here, whole)
            if why is not None:
                self.unusable = "%s: %s" % (probe, why)
                return [(key, variable, value) for (key, variable), value in
                        zip(variables, run(sess, [variable for _, variable in variables]))]
        out = [(key, variable, made[key].digest(*value) if key in made else value)
               for (key, variable), value in zip(variables, values)]
        again = [i for i, (_, _, value) in enumerate(out) if value is None]
        for i, value in zip(again, run(sess, [out[i][1] for i in again]) if again else []):
            out[i] = (out[i][0], out[i][1], value)
        return out

    def _make(self, graph: Any, tensors: List[Any], careful: bool) -> Dict[str, Optional[Made]]:
        new = [t for t in tensors if (_name(t), careful) not in self._made]
        if new and self.unusable is None:
            finalized = graph.finalized
            try:
                if finalized:
                    graph._unsafe_unfinalize()  # a MonitoredSession's graph: the ops are added once
                with graph.as_default(), graph.control_dependencies(None), graph.name_scope(SCOPE + "/"):
                    for tensor in new:
                        self._made[(_name(tensor), careful)] = digest_ops(self._tf, tensor, careful)
            except Exception as exc:  # noqa: BLE001 - any failure to build leaves the values fetched
                self.unusable = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
                for tensor in new:
                    self._made.setdefault((_name(tensor), careful), None)
            finally:
                if finalized:
                    graph.finalize()
        return {_name(t): self._made.get((_name(t), careful)) for t in tensors}


class InGraph:
    """The digest ops of the graph a recording records (made anew for another graph); where none
    can be made there, the recording is warned once, and its digests are made in numpy."""

    def __init__(self, tf: Any) -> None:
        self._tf = tf
        self._digests: Optional[GraphDigests] = None

    def of(self, graph: Any, warn: Callable[[str], None]) -> Optional[GraphDigests]:
        if self._digests is None or self._digests.graph is not graph:
            self._digests = GraphDigests(self._tf, graph)
        digests = self._digests
        if digests.unusable is not None and not digests.said:
            digests.said = True
            warn("digests are made in numpy from here on, not in the graph: %s" % digests.unusable)
        return None if digests.unusable else digests


def assembled(made: Mapping[str, Made], values: List[Tuple[str, Any]]) -> List[Tuple[str, Any]]:
    """A step's fetched values with each swapped key's (stats, sample) made its Digest."""
    return [(key, made[key].digest(*value) if key in made else value) for key, value in values]


def _name(tensor: Any) -> str:
    return str(tensor.name)
