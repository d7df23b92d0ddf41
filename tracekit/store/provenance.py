"""Where a golden's data came from: meta["provenance"] (docs/FORMAT.md).

A golden starts as a *recording* of the legacy code (`tracekit record`, tracekit.tf1) or,
when no legacy recording exists, as a TF2 run; every later rewrite appends an *update*.
Once any update has replaced its data, the golden is *derived*: its numbers come from a
TF2 run, not from the legacy code, and every report says so. The original recording's
date, command and environment are kept through every update.

    {"origin": "recorded" | "derived",
     "recording": {"date", "command", "cwd", "environment", "tensorflow"} or nil,
     "updates": [{"date", "by", "test", "reason", "tracekit", "tensorflow", "environment",
                  "created", "replaced", "drift": [{"kind", "tensors", "changed", "max_abs",
                                                    "max_rel", "first_step"}], "initial_kept"}],
     "owners": [pytest node ids of the tests that wrote it]}

Goldens written before this key existed read as recordings made when the file was
created. Plain data only; runs on Python 3.7 (the recorder writes `recording_meta`).
"""

from __future__ import annotations

import datetime
import os
import shlex
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional

META_KEY = "provenance"
RECORDED = "recorded"  # the data is the legacy recording's
DERIVED = "derived"  # the data comes from a TF2 run


@dataclass(frozen=True)
class Recording:
    """The original legacy recording: when, how, and on what."""

    date: str
    command: Optional[str] = None
    cwd: Optional[str] = None
    environment: Dict[str, Any] = field(default_factory=dict)  # meta["environment"] of the recording
    tensorflow: Dict[str, Any] = field(default_factory=dict)  # meta["tensorflow"] of the recording


@dataclass(frozen=True)
class KindDrift:
    """How one kind of tensor changed when a golden was replaced: over every step and tensor
    of the kind, compared bit for bit with the golden it replaced."""

    kind: str
    tensors: int  # compared
    changed: int  # of them, with any element differing
    max_abs: float
    max_rel: float
    first_step: Optional[int]  # the first step that changed (-1: the initial state), None if none


@dataclass(frozen=True)
class Revision:
    """One rewrite of the golden's data from a TF2 run."""

    date: str
    by: str  # what wrote it: "pytest --tracekit-update=all", "tracekit accept", ...
    reason: Optional[str] = None
    test: Optional[str] = None  # the pytest node id whose run produced the data
    tracekit: Optional[str] = None
    tensorflow: Optional[str] = None  # the TF2 version that ran
    environment: Dict[str, Any] = field(default_factory=dict)  # meta["environment"] of the TF2 run
    created: bool = False  # no golden existed: this run made it
    replaced: Optional[str] = None  # where the replaced golden was kept, if it was
    replaced_origin: Optional[str] = None  # RECORDED or DERIVED: what the replaced golden was
    drift: List[KindDrift] = field(default_factory=list)  # against the replaced golden
    steps: Optional[int] = None  # steps of the new data
    # "kind/name" of the initial state kept from the replaced golden: what the run made only at its
    # first step (Keras optimizer slots), which its replay had loaded from that golden
    initial_kept: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class Provenance:
    origin: str  # RECORDED or DERIVED
    recording: Optional[Recording]  # None: the golden began as a TF2 run
    updates: List[Revision] = field(default_factory=list)
    owners: List[str] = field(default_factory=list)
    stored: bool = True  # False: inferred for a golden written before provenance was kept

    @property
    def derived(self) -> bool:
        return self.origin == DERIVED

    @property
    def last(self) -> Optional[Revision]:
        return self.updates[-1] if self.updates else None

    def to_meta(self) -> Dict[str, Any]:
        """The meta["provenance"] value."""
        return {"origin": self.origin, "recording": None if self.recording is None else asdict(self.recording),
                "updates": [asdict(u) for u in self.updates], "owners": list(self.owners)}


def utc_now() -> str:
    """Dates in provenance: ISO 8601, UTC, to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def command_line() -> str:
    """This process's command line, as typed: /proc/self/cmdline where there is one (it keeps
    `tracekit record ... -- script.py` though the launcher rewrites sys.argv), else sys.argv."""
    argv: List[str] = []
    try:
        with open("/proc/self/cmdline", "rb") as fh:
            argv = [a.decode("utf-8", "replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        pass
    if not argv:
        argv = [os.path.basename(sys.executable or "python")] + list(sys.argv)
    return " ".join(shlex.quote(a) for a in argv)


def recording_meta() -> Dict[str, Any]:
    """What the legacy recorder stores at the start of a recording (its environment is the
    trace's own meta["environment"] and meta["tensorflow"], copied here on the first update)."""
    return {"origin": RECORDED, "recording": {"date": utc_now(), "command": command_line(), "cwd": os.getcwd()},
            "updates": [], "owners": []}


def read(meta: Mapping[str, Any], created: str) -> Provenance:
    """The provenance of a trace from its metadata; inferred for goldens that predate it
    (a TF2 replay's trace, which carries meta["replay"], counts as derived)."""
    stored = meta.get(META_KEY)
    inferred = not isinstance(stored, Mapping)
    if inferred:  # older than provenance: a recording made when the file was, named by its program
        derived = "replay" in meta
        stored = {"origin": DERIVED if derived else RECORDED,
                  "recording": None if derived else {"date": created, "command": _program_entry(meta)}}
    rec = stored.get("recording")
    recording = None
    if isinstance(rec, Mapping):
        recording = Recording(
            date=str(rec.get("date") or created), command=rec.get("command"), cwd=rec.get("cwd"),
            # Until the first update the recording's environment is the trace's own.
            environment=_dict(rec.get("environment")) or _dict(meta.get("environment")),
            tensorflow=_dict(rec.get("tensorflow")) or _dict(meta.get("tensorflow")))
    updates = [_update(u) for u in stored.get("updates") or [] if isinstance(u, Mapping)]
    origin = stored.get("origin") if stored.get("origin") in (RECORDED, DERIVED) else RECORDED
    owners = [str(o) for o in stored.get("owners") or []]
    return Provenance(origin, recording, updates, owners, stored=not inferred)


def _update(data: Mapping[str, Any]) -> Revision:
    drift = [KindDrift(str(d.get("kind")), int(d.get("tensors") or 0), int(d.get("changed") or 0),
                       float(d.get("max_abs") or 0.0), float(d.get("max_rel") or 0.0), d.get("first_step"))
             for d in data.get("drift") or [] if isinstance(d, Mapping)]
    known = {f: data.get(f) for f in ("reason", "test", "tracekit", "tensorflow", "replaced", "replaced_origin",
                                      "steps")}
    return Revision(date=str(data.get("date") or "?"), by=str(data.get("by") or "?"),
                    environment=_dict(data.get("environment")), created=bool(data.get("created")), drift=drift,
                    initial_kept=[str(k) for k in data.get("initial_kept") or []], **known)


def _dict(value: Any) -> Dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _program_entry(meta: Mapping[str, Any]) -> Optional[str]:
    program = meta.get("program")
    return program.get("entry") if isinstance(program, Mapping) else None
