"""The vocabulary every part of tracekit speaks: what a recorded tensor is (its kind),
how it is named ("kind/name" keys such as "grad/dense/kernel:0") and how steps are named.
Nothing here knows the file format, TensorFlow or the comparison. Python 3.7 syntax."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Dict, Mapping, Optional, Tuple

from .errors import UsageError

INITIAL_STEP = -1  # the state before the first step
# The update "type" of a hand-written update (assign ops computed from gradients) in a golden's
# slots and updates metadata, where an optimizer's update op gives its op type.
ASSIGNED = "assign"
# A step's info: {step counter: how far past its value before the step a racy learning rate read
# it} (record/counter_reads.py); a replay feeds it to the port's schedule for the step.
COUNTER_READS = "counter_reads"


def counters_read(info: Mapping[str, Any]) -> Dict[str, int]:
    """A step info's COUNTER_READS ({} where it keeps none, or keeps something else)."""
    kept = info.get(COUNTER_READS)
    if not isinstance(kept, Mapping):
        return {}
    return {str(k): int(v) for k, v in kept.items() if isinstance(v, int) and not isinstance(v, bool)}


class Kind(str, Enum):
    """What a recorded tensor is. The order is data-flow order within a step."""

    INPUT = "input"
    RANDOM = "random"
    TAP = "tap"
    FETCH = "fetch"
    LOSS = "loss"
    LR = "lr"
    GRAD = "grad"
    VAR = "var"
    SLOT = "slot"

    @classmethod
    def parse(cls, value: "str | Kind") -> "Kind":
        try:
            return cls(value)
        except ValueError:
            raise UsageError(
                "unknown tensor kind %r; use one of: %s" % (value, ", ".join(k.value for k in cls))
            ) from None


KIND_ORDER = {kind.value: i for i, kind in enumerate(Kind)}
STATE_KINDS = frozenset({Kind.VAR.value, Kind.SLOT.value})  # the training state: variables and slots
# What a recording or replay with every=K keeps on every step; the rest every K-th step only.
LIGHT_KINDS = frozenset({Kind.INPUT.value, Kind.RANDOM.value, Kind.LOSS.value, Kind.LR.value})


@dataclass(frozen=True)
class Key:
    """A tensor's identity in a step: Key("grad", "dense/kernel:0"), "grad/dense/kernel:0" as text."""

    kind: str
    name: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", Kind.parse(self.kind).value)
        check_name(self.name)

    @classmethod
    def parse(cls, text: str) -> "Key":
        return cls(*split_key(text))

    def __str__(self) -> str:
        return make_key(self.kind, self.name)


def make_key(kind: "str | Kind", name: str) -> str:
    """The mapping key of a tensor in a step: "kind/name", e.g. "grad/dense/kernel:0"."""
    return "%s/%s" % (kind.value if isinstance(kind, Kind) else kind, name)


def split_key(key: str) -> Tuple[str, str]:
    """("grad", "dense/kernel:0") from "grad/dense/kernel:0"; KeyError if it is no key."""
    kind, sep, name = key.partition("/")
    if not sep or not name:
        raise KeyError("%r is not a tensor key; keys look like 'grad/dense/kernel:0'" % (key,))
    return Kind.parse(kind).value, name


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise UsageError("a tensor name must be a non-empty str, got %r" % (name,))
    if "\x00" in name:
        raise UsageError("a tensor name cannot contain NUL characters: %r" % (name,))
    return name


# The loss TF1's regularization terms are compared as (their sum), and the metadata sections
# tracekit reads by name (their records: store/meta.py; docs/FORMAT.md).
REGULARIZATION = "loss/regularization"
RECORDING, REPLAY, PROGRAM, REGULARIZATION_LOSSES = "recording", "replay", "program", "regularization_losses"
AUDIT = "audit"  # the update audit's verdicts (store/audit.py)
REEXECUTED = "reexecuted"  # the recorder's re-execution of each update (record/rerun.py), its own verdicts
# What the recorder found and checked of its own claims: each loss's graph tensor, the step-0 check.
LOSSES, SELF_CHECK = "losses", "self_check"
# What the recording warns of (a gradient not found, a race, steps with no input): sentences.
WARNINGS = "warnings"
# What the program does with its random draws: "random/<tensor>" -> {"use": "dropout", "rate"} (record/draws.py).
DRAWS = "draws"
# What each kind of step records: kind of step -> {tensor kind: how many} (store/held.py).
HELD = "held"
# How far a race moved each racy gradient the update read: "grad/..." -> {"effect", "step"} (record/witness.py).
RACE_EFFECTS = "race_effects"

# An addend of a loss the recorder found (record/terms.py), "<loss>@term<i>": fetched with the
# step, kept in its info (not a tensor of the golden's) to name a slip in one part of the loss.
TERM = "@term"

# A value one replica of a tf.distribute replay computed, beside the cross-replica value: "<name>@replica<id>".
REPLICA = "@replica"
# A sparse gradient (IndexedSlices: an embedding's rows) is two tensors: "<var>/values", "<var>/indices".
SPARSE_VALUES, SPARSE_INDICES = "/values", "/indices"


def sparse_owner(name: str) -> Optional[str]:
    """The variable a sparse gradient's part belongs to ("emb:0" for "emb:0/values"), else None."""
    for part in (SPARSE_VALUES, SPARSE_INDICES):
        if name.endswith(part):
            return name[:-len(part)]
    return None


# A gradient before tf.clip_by_global_norm, beside the applied one under the variable's name: "<var>@unclipped".
UNCLIPPED = "@unclipped"
# What each micro-batch run of a step added to a variable's gradient accumulator, stacked: "<var>@micro".
MICRO = "@micro"
# A variable's value when step k started, recorded in step k where a run between steps (a target
# network's sync, a counter set by hand) changed it after step k - 1 ended: "<var>@before".
BEFORE = "@before"


def replica_name(name: str, replica: int) -> str:
    return "%s%s%d" % (name, REPLICA, replica)


def replica_base(name: str) -> str:
    """The cross-replica name a per-replica name belongs to (itself if it is none)."""
    base, sep, rid = name.rpartition(REPLICA)
    return base if sep and rid.isdigit() else name


def step_label(step: int) -> str:
    """How messages and reports name a step."""
    return "initial state" if step == INITIAL_STEP else "step %d" % step
