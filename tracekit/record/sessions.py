"""Reading TF1 session calls: the raw Session inside a MonitoredSession, what a run
fetches and feeds, and fetched structures in a form the store takes. TensorFlow is
handed in, never imported (Python 3.7 and TF 1.15)."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any, Callable, Collection, List, Optional, Tuple

import numpy as np

from ..keys import LIGHT_KINDS, split_key
from ..store.structures import KEY_TYPES


def recorded(plan: Any, full: bool, callable_: bool, refuted: Collection[str]) -> "collections.OrderedDict[str, Any]":
    """What a step of `plan` (graph.StepPlan) fetches to record (key -> tensor): all of it, or
    the light kinds; from session.run (not `callable_`), none of what it refuses to fetch; none
    of `refuted`."""
    return collections.OrderedDict((key, tensor) for key, tensor in plan.fetch.items()
                                   if (full or split_key(key)[0] in LIGHT_KINDS)
                                   and (callable_ or key not in plan.unfetchable) and key not in refuted)


def unfetched(plan: Any, full: bool, warn: Callable[[str], None]) -> List[Tuple[str, Any]]:
    """What session.run could not fetch of a step: the constants among it, recorded as the values
    they are; the rest said in a warning."""
    out = []
    for key, value in plan.unfetchable.items():
        if not full and split_key(key)[0] not in LIGHT_KINDS:
            continue
        if value is not None:
            out.append((key, value))
        else:
            warn("%s (%s) is computed inside a tf.cond branch, which session.run does not fetch: it is not "
                 "recorded" % (key, plan.fetch[key].name))
    return out


def storable(fetched: Any) -> Any:
    """The fetched structure with keys the store takes: MonitoredSession fetches are keyed by
    hook objects, which become their class names."""
    if isinstance(fetched, Mapping):
        out: collections.OrderedDict = collections.OrderedDict()
        for key, value in fetched.items():
            if not isinstance(key, KEY_TYPES):
                key = getattr(key, "name", None) if hasattr(key, "graph") else type(key).__name__
                key = "%s" % key
                while key in out:
                    key += "'"
            out[key] = storable(value)
        return out
    if isinstance(fetched, list):
        return [storable(v) for v in fetched]
    if isinstance(fetched, tuple) and not hasattr(fetched, "_fields"):
        return tuple(storable(v) for v in fetched)
    return fetched


def raw_session(sess: Any) -> Any:
    """The tf.compat.v1.Session inside a MonitoredSession (or the session itself)."""
    for _ in range(8):
        if hasattr(sess, "_make_callable_from_options") and hasattr(sess, "graph"):
            return sess
        inner = getattr(sess, "_tf_sess", None)
        if callable(inner):
            sess = inner()
            continue
        sess = getattr(sess, "_sess", None)
        if sess is None:
            return None
    return None


def flatten_fetches(fetches: Any) -> List[Any]:
    if isinstance(fetches, (list, tuple)):
        return [leaf for item in fetches for leaf in flatten_fetches(item)]
    if isinstance(fetches, Mapping):
        return [leaf for item in fetches.values() for leaf in flatten_fetches(item)]
    if fetches is None:
        return []
    return [fetches]


def as_op(element: Any) -> Any:
    return element if hasattr(element, "node_def") else getattr(element, "op", None)


def element_name(graph: Any, key: Any) -> Optional[str]:
    """The tensor name of a feed_dict key (a tensor, or a name), None for what is not one."""
    try:
        element = graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
    except (TypeError, ValueError, KeyError):
        return None
    return getattr(element, "name", None)


def make_hook(tf: Any, recorder: Any) -> Any:
    class RecorderHook(tf.compat.v1.train.SessionRunHook):
        """Attaches the recorder to the session a MonitoredSession creates."""

        def after_create_session(self, session: Any, coord: Any) -> None:
            recorder.session(session)

    return RecorderHook()


def as_consumed(graph: Any, name: str, value: Any) -> "tuple[Any, Optional[str]]":
    """A fed value in the dtype the graph consumed it as (a float64 array fed to a float32
    placeholder is converted by the session), and the dtype it was fed in where that differs."""
    value = np.asarray(value)
    try:
        dtype = np.dtype(graph.get_tensor_by_name(name).dtype.as_numpy_dtype)
    except (KeyError, ValueError, TypeError, AttributeError):
        return value, None
    if value.dtype == dtype or value.dtype.kind not in "biuf" or dtype.kind not in "biuf":
        return value, None
    return value.astype(dtype), str(value.dtype)
