"""A trace's metadata as typed records: each section tracekit reads is a frozen dataclass made
from its msgpack form (`of`) and back (`to_meta`), with what an older golden's absent keys mean
written once, as the field defaults. A record keeps the keys it does not know (a newer
tracekit's) and which known keys its source had, so a golden's metadata round-trips exactly.
docs/FORMAT.md documents each section. Python 3.7 syntax (the recorder writes through it)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Dict, List, Mapping, Optional, Type, TypeVar

from ..keys import PROGRAM, RECORDING, REPLAY

R = TypeVar("R", bound="Section")


@dataclass(frozen=True)
class Section:
    """A metadata section: its fields, the keys tracekit does not know (`extra`), and the known
    keys its source held (`given`; a record made by tracekit holds them all)."""

    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    given: "frozenset[str]" = field(default=frozenset(), repr=False, compare=False)

    @classmethod
    def known(cls) -> List[str]:
        return [f.name for f in fields(cls) if f.name not in ("extra", "given")]

    @classmethod
    def of(cls: Type[R], meta: Any) -> R:
        """The record of a section as stored (a dict; anything else reads as an absent section)."""
        stored = dict(meta) if isinstance(meta, Mapping) else {}
        names = cls.known()
        return cls(extra={k: v for k, v in stored.items() if k not in names},  # type: ignore[call-arg]
                   given=frozenset(k for k in names if k in stored),
                   **{k: stored[k] for k in names if k in stored})

    @classmethod
    def made(cls: Type[R], **values: Any) -> R:
        """A record tracekit writes: every field stored, whether given here or defaulted; values
        of other names (a runner's own) are kept beside them."""
        names = cls.known()
        return cls(extra={k: v for k, v in values.items() if k not in names},  # type: ignore[call-arg]
                   given=frozenset(names), **{k: v for k, v in values.items() if k in names})

    def to_meta(self) -> Dict[str, Any]:
        """The msgpack form: the fields the source held (all, for a record made by tracekit), then
        the unknown keys."""
        out = {name: getattr(self, name) for name in self.known() if name in self.given}
        out.update(self.extra)
        return out

    def but(self: R, **changes: Any) -> R:
        return replace(self, given=self.given | frozenset(changes), **changes)


@dataclass(frozen=True)
class RecordingMeta(Section):
    """meta["recording"]: how the recorder kept the steps (record/keyframes.py)."""

    every: int = 1  # gradients, taps and variables whole every K-th step (digests between)
    steps_limit: Optional[int] = None  # the steps asked for (None: until the script ended)
    keyframes: Optional[Dict[str, Any]] = None  # the plan: spacing, kinds kept, budget (before: none)
    worker: Optional[int] = None  # parameter-server training: the worker task recorded


@dataclass(frozen=True)
class ProgramMeta(Section):
    """meta["program"]: which code made the trace (comparison/engine.same_code)."""

    entry: Optional[str] = None  # the script, or the step function and model class
    sha256: Optional[str] = None  # of the source files


@dataclass(frozen=True)
class ReplayMeta(Section):
    """meta["replay"]: what a TF2 replay (or derived recording) was asked and learnt."""

    golden: Optional[str] = None  # the golden replayed (None: a derived recording's own data)
    source: Optional[str] = None  # "data": a derived recording (tracekit.tf2.derive)
    init: str = "golden"
    random: str = "tape"
    forcing: str = "none"
    every: int = 1
    mapping: Dict[str, str] = field(default_factory=dict)  # golden variable -> port variable
    matched_by: Dict[str, str] = field(default_factory=dict)  # golden variable -> how it was matched
    converted: Dict[str, str] = field(default_factory=dict)  # golden variable -> its weight conversion
    not_replayed: Dict[str, str] = field(default_factory=dict)  # "kind/name" -> why the port lacks it
    steps: int = 0  # steps replayed
    limited: bool = False  # fewer steps asked for (steps=N) or stopped as asked: not a replay cut short
    stopped: bool = False  # ended early (fail_fast)
    own_initial: List[str] = field(default_factory=list)  # slots whose initial state is the port's own
    optimizer_settings: Dict[str, Any] = field(default_factory=dict)  # per optimizer, as the port has it
    applies: Optional[int] = None  # the optimizers' apply_gradients calls in the first step, as they ran
    # which Keras the port's model and optimizers come from: {"model": ["Keras 3.13.1"], "optimizer": [...]}
    keras: Dict[str, List[str]] = field(default_factory=dict)
    distribution: Optional[Dict[str, Any]] = None  # under a tf.distribute strategy: where it ran
    nudge: Optional[int] = None  # a start moved one ulp with this seed (calibrate, the drift envelope)
    jitter: bool = False  # moved again after every step
    restarted_at: List[int] = field(default_factory=list)  # steps forced to the golden's state
    # golden draw -> [its shape, the port's]: draws the random tape fed reshaped
    reshaped_draws: Dict[str, List[List[int]]] = field(default_factory=dict)
    # golden draw -> the rate of the port's dropout that took it (where the port's call says)
    draw_rates: Dict[str, float] = field(default_factory=dict)
    # teacher forcing, as checked at its first step: {"step", "set": {kind: count}, "not_set": {"kind/name": why}}
    forced: Optional[Dict[str, Any]] = None
    # the golden's initial state the optimizers' first updates loaded (slots, step counters), read back
    # at once: {"read_back": [as the golden's], "otherwise": [keys]} (the variables are compared at the
    # initial step); None for replays from before it was kept
    loaded: Optional[Dict[str, List[str]]] = None
    # the port's source lines ("kind/name" -> {"made", "update"}: tracekit/sources.py), from the first
    # step of each kind
    sources: Dict[str, Any] = field(default_factory=dict)
    # golden step counter -> {"port": its port variable, "steps": steps fed, "moved": steps it was moved in,
    # "first_moved", "unfed": steps with no port counter to move, "first_unfed"}: TF1's racy rate reads
    # (record/counter_reads.py)
    counter_reads: Dict[str, Any] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)  # what the runner learnt that the report should say


def replay_of(meta: Mapping[str, Any]) -> Optional[ReplayMeta]:
    """A trace's replay record; None for a recording (no replay section)."""
    section = meta.get(REPLAY)
    return ReplayMeta.of(section) if isinstance(section, Mapping) else None


def round_trip(meta: Mapping[str, Any]) -> Dict[str, Any]:
    """The metadata read into its records and written back (what a test holds equal to `meta`)."""
    out = dict(meta)
    for name, record in ((RECORDING, RecordingMeta), (PROGRAM, ProgramMeta), (REPLAY, ReplayMeta)):
        if isinstance(meta.get(name), Mapping):
            out[name] = record.of(meta[name]).to_meta()
    return out
