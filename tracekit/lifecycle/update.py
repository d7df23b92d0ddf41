"""Write a golden from a TF2 run's trace: a replay of the golden (an update) or a run on
given data when there was none (a new, derived golden).

The new golden holds the run's tensors, step by step, with the golden's own description
of the training (its train ops, optimizer slots, seeds, user metadata) and its provenance:
the original recording, kept through every update, and one more update naming when, why,
by what, on which environment, and how far the data moved from the golden it replaced. The
replaced file is kept under .tracekit/history/ unless told not to. Nothing is written in
place: see atomic.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional

from .._version import __version__
from ..errors import UsageError
from ..keys import STATE_KINDS, split_key
from ..store import Trace, create, journal_path, open_trace, provenance
from ..store.meta import replay_of
from ..store.provenance import DERIVED, KindDrift, Provenance, Revision, utc_now
from ..store.remote import refuse_url
from . import atomic
from .drift import drift
from .._ci import in_ci
from .workspace import Workspace

# Metadata that describes the run which computed the data: the new data's run replaces it.
RUN_KEYS = ("environment", "tensorflow", "program")
# Metadata of a trace that is not a golden's: how a replay or recording was made.
TRANSIENT_KEYS = ("replay", "recording", "recovered", "catalog", provenance.META_KEY)


@dataclass(frozen=True)
class Written:
    """What write_golden did."""

    path: str
    created: bool  # no golden was there before
    kept: Optional[str]  # where the replaced golden was kept
    provenance: Provenance
    drift: List[KindDrift]


def write_golden(actual: "Trace | str", golden: str, workspace: Workspace, *, by: str, reason: Optional[str] = None,
                 test: Optional[str] = None, keep: bool = True) -> Written:
    """Make `actual` (a TF2 run's trace) the golden at `golden`, atomically, holding the lock
    of the goldens directory. `by` says what wrote it; `test` is the pytest node id of the run,
    recorded as an owner of the golden; `keep`: keep the replaced golden under .tracekit/history."""
    refuse_url(golden, "write a golden")
    with atomic.locked(os.path.dirname(os.path.abspath(golden))):
        return write_locked(actual, golden, workspace, by=by, reason=reason, test=test, keep=keep)


def write_locked(actual: "Trace | str", golden: str, workspace: Workspace, *, by: str, reason: Optional[str] = None,
                 test: Optional[str] = None, keep: bool = True) -> Written:
    """write_golden for a caller that holds the directory's lock already."""
    refuse_url(golden, "write a golden")
    refuse_in_ci("write %s" % golden)
    source = actual if isinstance(actual, Trace) else open_trace(actual)
    temporary, kept = atomic.temporary_beside(golden), None
    try:
        _check_source(source)
        base = open_trace(golden) if os.path.exists(golden) else None
        try:
            if base is not None:
                _check_length(source, base)
            changes = drift(base, source) if base is not None else []
            history = provenance.read(base.meta, base.created) if base is not None else None
            kept = _history_path(golden, workspace, "") if base is not None and keep else None
            kept_initial = _kept_initial(base, source) if base is not None else {}
            record = _provenance(history, source, changes, kept and workspace.relative(kept), by=by, reason=reason,
                                 test=test, initial_kept=sorted(kept_initial))
            infos = [base.step(i).info for i in range(min(len(base), len(source)))] if base is not None else []
            _copy(source, temporary, _meta(base, source, record), infos, kept_initial)
        finally:
            if base is not None:
                base.close()
        if kept is not None:  # only once the new golden is written: a failed write keeps no copy
            atomic.copy(golden, kept)
        atomic.publish(temporary, golden)
    except BaseException:
        _discard_trace(temporary)
        if kept is not None:
            atomic.discard(kept)  # the golden was not replaced: nothing to keep
        raise
    finally:
        if source is not actual:
            source.close()
    return Written(golden, base is None, kept, record, changes)


def refuse_in_ci(what: str) -> None:
    """Goldens are never written in CI, whatever asks (the plugin's flags, tracekit accept)."""
    if in_ci():
        raise UsageError("CI is set (CI=%s): tracekit does not %s in CI; review the pending actuals locally "
                         "(unset CI to write goldens deliberately)" % (os.environ.get("CI"), what))


def _check_source(trace: Trace) -> None:
    if not trace.complete:
        raise UsageError("%s is unfinished (%s): a golden is only made from a complete run" % (trace.path, trace.problem))
    if replay_of(trace.meta) is None:
        raise UsageError("%s is not a TF2 run's trace (no replay metadata): goldens are updated from "
                         "tracekit.tf2.replay or tracekit.tf2.derive results; record a legacy golden with "
                         "tracekit record" % trace.path)


def _check_length(source: Trace, base: Trace) -> None:
    if len(source) < len(base):
        raise UsageError("%s replayed %d of the %d steps of %s (steps=%d): writing it would drop the golden's last "
                         "%d steps; replay every step to update it"
                         % (source.path, len(source), len(base), base.path, len(source), len(base) - len(source)))


def retire(golden: str, workspace: Workspace, label: str) -> str:
    """Move a golden out of the goldens (an unused one) to .tracekit/history/<its path>.<time>.<label>.h5;
    returns where it went."""
    refuse_url(golden, "move a golden")
    refuse_in_ci("move %s" % golden)
    with atomic.locked(os.path.dirname(os.path.abspath(golden))):
        path = _history_path(golden, workspace, "." + label)
        try:
            os.replace(golden, path)  # a rename where .tracekit shares the goldens' file system
        except OSError:
            atomic.copy(golden, path)
            os.remove(golden)
    return path


def _history_path(golden: str, workspace: Workspace, label: str) -> str:
    stamp = utc_now().replace("-", "").replace(":", "")[:15] + "Z"  # 20261124T231125Z
    rel = workspace.relative(golden)
    rel = os.path.basename(rel) if os.path.isabs(rel) else rel
    stem = os.path.join(workspace.ensure("history"), rel[:-3] if rel.endswith(".h5") else rel)
    path, n = "%s.%s%s.h5" % (stem, stamp, label), 1
    while os.path.exists(path):
        n += 1
        path = "%s.%s-%d%s.h5" % (stem, stamp, n, label)
    return path


def _kept_initial(base: Trace, source: Trace) -> Dict[str, Any]:
    """The replaced golden's initial values of the state a replay with init='golden' loaded at
    its first update: Keras makes optimizer slots (and its step counter) there, and the replay
    replaces what the port made (its trace's initial state of those slots, or nothing) with the
    golden's. The new golden keeps those, what its steps started from, so that a replay of it
    starts from the same state ("kind/name" -> value). A replay with init='seed' started them
    from the port's own values: nothing."""
    replay = replay_of(source.meta)
    if replay is None or replay.init != "golden":
        return {}
    before = set(source.initial) - set(replay.own_initial)
    wanted = [t.key for t in source.catalog if t.kind in STATE_KINDS and t.steps and t.key not in before]
    initial = base.initial
    return {key: initial[key] for key in wanted if key in initial}


def _provenance(history: Optional[Provenance], source: Trace, changes: List[KindDrift], kept: Optional[str], *,
                by: str, reason: Optional[str], test: Optional[str], initial_kept: List[str]) -> Provenance:
    """The new golden's provenance: `history` is the replaced golden's (None: there was none)."""
    tensorflow = source.meta.get("tensorflow")
    update = Revision(date=utc_now(), by=by, reason=reason, test=test, tracekit=__version__,
                      tensorflow=tensorflow.get("version") if isinstance(tensorflow, dict) else None,
                      environment=dict(source.meta.get("environment") or {}), created=history is None,
                      replaced=kept, replaced_origin=None if history is None else history.origin, drift=changes,
                      steps=len(source), initial_kept=initial_kept)
    if history is None:
        return Provenance(DERIVED, None, [update], [test] if test else [])
    owners = list(history.owners) + ([test] if test and test not in history.owners else [])
    # The recording keeps its own environment once the golden's data (and environment) is the TF2 run's.
    return replace(history, origin=DERIVED, updates=list(history.updates) + [update], owners=owners, stored=True)


def _meta(base: Optional[Trace], source: Trace, record: Provenance) -> Dict[str, Any]:
    """The golden's description of its training (from the golden it replaces), the run's
    environment (from the new data), and the provenance."""
    meta = {k: v for k, v in (base.meta if base is not None else {}).items()
            if k not in RUN_KEYS and k not in TRANSIENT_KEYS}
    meta.update((k, source.meta[k]) for k in RUN_KEYS if k in source.meta)
    meta[provenance.META_KEY] = record.to_meta()
    return meta


def _copy(source: Trace, path: str, meta: Dict[str, Any], infos: List[Dict[str, Any]],
          initial: Dict[str, Any]) -> None:
    """Every tensor of `source`, step by step, into a new trace at `path`, its initial state
    completed by `initial` (_kept_initial), and its digests where it keeps them; step k's info is
    the replaced golden's (its train ops and global step), not the replay's bookkeeping."""
    with create(path, mode="w-", meta=meta) as writer:
        if source.has_initial or initial:
            with writer.initial():
                for key, value in source.initial.items():
                    if key not in initial:  # a slot the port made: the steps started from the golden's
                        writer.add(*split_key(key), value=value, copy=False)
                for key, value in initial.items():
                    writer.add(*split_key(key), value=value, copy=False)
        for index, step in enumerate(source):
            with writer.step(info=infos[index] if index < len(infos) else {}):
                for key, value in step.items():
                    writer.add(*split_key(key), value=value, copy=False)
                for key, kept in step.digests.items():
                    writer.add(*split_key(key), value=kept)


def _discard_trace(path: str) -> None:
    atomic.discard(path)
    atomic.discard(journal_path(path))
