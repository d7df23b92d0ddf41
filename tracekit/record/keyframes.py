"""Which steps a recording keeps whole (keyframes) and how it fits a size budget.

A keyframe keeps every tensor's values; the steps between keep inputs, random draws, losses
and learning rates whole (a replay is driven by them) and the rest as digests
(store/digest.py), or, without digests, nothing of the rest. Keyframes are every K-th step
from step 0, and the last step when the recording knows its length.

With a size budget the recorder plans at its first step, from the stored size of the initial
state and what step 0 fetched: the smallest K at which every kind stays whole at
keyframes, if that K is at most PREFERRED_EVERY; else kinds go to digests at keyframes too
(fetches, then taps, then gradients: the training state goes last, since a replay restarts
from it) and K is the smallest that fits; at the very least only digests between the
initial state and the end. Before each keyframe it checks the bytes written so far against
what the rest needs, and keeps digests instead where the estimate was short.

A budget without a step count plans online: the run may end at any step, so a keyframe is kept
only where, after it, the budget still holds as many more steps as have run, at the spacing
then (the run doubling its length); where it does not, the spacing doubles (keyframes thin out
as the run grows) and the step is kept as digests. When not even one more step of digests
fits, the recording ends there, said in the golden's warnings: the golden stays under the
budget whenever the run ends.
Python 3.7 syntax: the recorder runs in the legacy environment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from ..errors import RecordError, UsageError
from ..keys import LIGHT_KINDS, split_key
from ..store.digest import SAMPLE

FULL_KINDS = frozenset({"tap", "fetch", "grad", "var", "slot"})
# Kinds kept as digests at keyframes too, in the order a budget gives them up.
DEMOTIONS = (frozenset(), frozenset({"fetch"}), frozenset({"fetch", "tap"}), frozenset({"fetch", "tap", "grad"}))
PREFERRED_EVERY = 10
# The plan aims at this share of the budget: compression varies from step to step, and the file
# has HDF5's own bytes besides the values (measured: 400-600 bytes a dataset).
TARGET = 0.85
BYTES_PER_VALUE = 700
BYTES_PER_DIGEST = 160  # a digest's statistics, key and framing, besides its sample
_UNITS = {"": 1, "B": 1, "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12,
          "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}


def parse_size(text: "str | int") -> int:
    """Bytes from "500MB", "1.5GiB", "2e9" or an int."""
    if isinstance(text, int) and not isinstance(text, bool):
        size = text
    else:
        match = re.match(r"^\s*([0-9.eE+]+)\s*([A-Za-z]*)\s*$", str(text))
        unit = match.group(2).upper() if match else ""
        if not match or unit not in _UNITS:
            raise UsageError("a size looks like 500MB, 1.5GiB or 2000000000 (bytes); got %r" % (text,))
        try:
            size = int(float(match.group(1)) * _UNITS[unit])
        except ValueError:
            raise UsageError("a size looks like 500MB, 1.5GiB or 2000000000 (bytes); got %r" % (text,)) from None
    if size <= 0:
        raise UsageError("a size budget must be positive, got %r" % (text,))
    return size


@dataclass
class Keyframes:
    """Where a recording keeps what: `every` (None: no keyframe after the initial state), the
    last step (`steps`, when known), `digests` between keyframes, and `whole`: the kinds a
    keyframe keeps whole (the others as digests)."""

    every: Optional[int] = 1
    steps: Optional[int] = None
    digests: bool = True
    whole: FrozenSet[str] = FULL_KINDS
    budget: Optional[Dict[str, Any]] = None  # the plan's figures, for the golden's metadata
    skipped: List[int] = field(default_factory=list)  # planned keyframes kept as digests to stay in budget
    # A budget without a step count: keyframes chosen as the run goes (Schedule), the spacing
    # doubled at the steps in `thinned`, and the step the budget ended the recording at (None: it did not).
    online: bool = False
    thinned: List[int] = field(default_factory=list)
    ended: Optional[int] = None

    def keyframe(self, step: int) -> bool:
        if step in self.skipped:
            return False
        if self.every is None:
            return False
        return step % self.every == 0 or (self.steps is not None and step == self.steps - 1)

    def how(self, key: str, keyframe: bool) -> Optional[str]:
        """"whole", "digest" or None (not kept) for a tensor at a keyframe or a step between."""
        kind = split_key(key)[0]
        if kind in LIGHT_KINDS or (keyframe and kind in self.whole):
            return "whole"
        return "digest" if self.digests else None

    def meta(self) -> Dict[str, Any]:
        out = {"every": self.every, "last": self.every is not None and self.steps is not None, "digests": self.digests,
               "whole": sorted(self.whole), "budget": self.budget, "skipped": list(self.skipped)}
        if self.online:
            out.update(online=True, thinned=list(self.thinned), ended=self.ended)
        return out


@dataclass(frozen=True)
class StepSizes:
    """Estimated stored bytes of one step, by what a plan can choose: light kinds, and per
    heavy kind its values whole and as digests; and how many values a step holds."""

    light: int
    whole: Mapping[str, int]
    digest: Mapping[str, int]
    values: int

    def step(self, whole: FrozenSet[str]) -> int:
        kinds = set(self.whole) | set(self.digest)
        return self.light + sum(self.whole.get(k, 0) if k in whole else self.digest.get(k, 0) for k in kinds) + \
            self.values * BYTES_PER_VALUE

    def between(self) -> int:
        return self.light + sum(self.digest.values()) + BYTES_PER_VALUE * 4


def digest_bytes(shape: Sequence[int], itemsize: int) -> int:
    count = 1
    for n in shape:
        count *= int(n)
    return min(count, SAMPLE) * itemsize + BYTES_PER_DIGEST


def plan(budget: int, steps: int, initial: int, sizes: StepSizes) -> Keyframes:
    """The keyframes a recording of `steps` steps keeps within `budget` bytes, given the initial
    state's stored bytes and one step's sizes; RecordError if not even digests fit."""
    target = int(budget * TARGET)

    def total(every: Optional[int], whole: FrozenSet[str]) -> int:
        return estimate(steps, initial, sizes, every, whole)

    def smallest(whole: FrozenSet[str]) -> Optional[int]:
        for every in range(1, steps + 1):  # size falls as every grows
            if total(every, whole) <= target:
                return every
        return None

    chosen: Optional[Tuple[Optional[int], FrozenSet[str]]] = None
    for demoted in DEMOTIONS:
        every = smallest(FULL_KINDS - demoted)
        if every is not None and (every <= PREFERRED_EVERY or demoted == DEMOTIONS[-1]):
            chosen = (every, FULL_KINDS - demoted)
            break
    if chosen is None and total(None, frozenset()) <= target:
        chosen = (None, FULL_KINDS - DEMOTIONS[-1])
    if chosen is None:
        raise RecordError("a budget of %s cannot hold this recording: the initial state takes %s and %d steps of "
                          "digests %s more; give a larger --budget, or fewer --steps"
                          % (_size(budget), _size(initial), steps, _size(steps * sizes.between())))
    every, whole = chosen
    figures = {"bytes": budget, "estimate": total(every, whole), "initial": initial, "keyframe": sizes.step(whole),
               "between": sizes.between()}
    return Keyframes(every, steps, True, whole, figures)


ONLINE_KEYFRAMES = 4  # a budget without a step count keeps every kind whole if this many keyframes fit


def plan_online(budget: int, initial: int, sizes: StepSizes) -> Keyframes:
    """The start of an online plan (a budget without a step count): keyframes every step while
    they fit (Schedule thins them), keeping the kinds whole of the first demotion at which
    ONLINE_KEYFRAMES keyframes fit in half of what the initial state leaves; RecordError if not
    one step of digests fits."""
    target = int(budget * TARGET)
    left = target - initial
    if left < sizes.between():
        raise RecordError("a budget of %s cannot hold this recording: the initial state takes %s and one step of "
                          "digests %s more; give a larger --budget" % (_size(budget), _size(initial),
                                                                      _size(sizes.between())))
    whole: Optional[FrozenSet[str]] = None
    for demoted in DEMOTIONS:
        if ONLINE_KEYFRAMES * sizes.step(FULL_KINDS - demoted) <= left // 2:
            whole = FULL_KINDS - demoted
            break
    every = 1 if whole is not None or sizes.step(FULL_KINDS - DEMOTIONS[-1]) <= left // 2 else None
    whole = whole if whole is not None else FULL_KINDS - DEMOTIONS[-1]
    figures = {"bytes": budget, "initial": initial, "keyframe": sizes.step(whole), "between": sizes.between()}
    return Keyframes(every, None, True, whole, figures, online=True)


def online_keyframe(frames: Keyframes, step: int, written: int, sizes: StepSizes) -> bool:
    """Whether step `step` of an online plan is kept whole: at its spacing, and with the budget
    still holding as many more steps as have run at that spacing; else the spacing doubles (the
    step is kept whole if it still falls on it and fits)."""
    assert frames.budget is not None
    target = frames.budget["bytes"] * TARGET
    while frames.every is not None and step % frames.every == 0:
        every = frames.every
        later = (step + 1) * (sizes.between() + (sizes.step(frames.whole) - sizes.between()) / every)
        if written + sizes.step(frames.whole) + later <= target:
            return True
        frames.every = every * 2
        frames.thinned.append(step)
    return False


def estimate(steps: int, initial: int, sizes: StepSizes, every: Optional[int], whole: FrozenSet[str]) -> int:
    """The stored bytes of a recording: the initial state, its keyframes keeping `whole` whole,
    and digests at the other steps."""
    frames = len(_keyframes(every, steps))
    return initial + frames * sizes.step(whole) + (steps - frames) * sizes.between()


def _keyframes(every: Optional[int], steps: int) -> List[int]:
    if every is None:
        return []
    return sorted(set(range(0, steps, every)) | {steps - 1})


def room(planned: Keyframes, step: int, written: int, sizes: StepSizes) -> bool:
    """Whether keyframe `step` still fits: the bytes written so far, it, and the rest of the
    recording (its planned keyframes and digest steps) within the budget."""
    assert planned.budget is not None and planned.steps is not None
    later = [s for s in _keyframes(planned.every, planned.steps) if s > step]
    rest = planned.steps - step - 1
    need = written + sizes.step(planned.whole) + len(later) * sizes.step(planned.whole) + \
        (rest - len(later)) * sizes.between()
    return need <= planned.budget["bytes"] * TARGET


class Schedule:
    """A recording's keyframes as it goes: fixed (every K) or, with a budget, planned at step 0
    from what it stores (`measure`), each planned keyframe checked against what was written."""

    def __init__(self, every: int, steps: Optional[int], digests: bool, budget: Optional[int]) -> None:
        if budget is not None and (every != 1 or not digests):
            raise UsageError("a size budget chooses the keyframes itself: give neither every=K nor digests=False "
                             "with it")
        self.frames = Keyframes(every, steps, digests)
        self.budget = budget
        self.sizes: Optional[StepSizes] = None
        self._decided: Optional[Tuple[int, bool]] = None  # (step, kept whole): decided once a step

    @property
    def planning(self) -> bool:
        """A budget's plan is still to be made: the next step is measured."""
        return self.budget is not None and self.sizes is None

    def fetch_all(self, step: int) -> bool:
        """Whether step `step`'s run fetches every tensor: at a keyframe, where digests are kept,
        and at the step a budget plans from."""
        return self.frames.digests or self.frames.keyframe(step) or self.planning

    def measure(self, values: Mapping[str, Any], estimate: Any, written: int) -> None:
        """Plan the budget from one step's values ("kind/name" -> array) and the bytes written."""
        assert self.budget is not None
        self.sizes = measured(values, estimate)
        self._decided = None
        if self.frames.steps is None:
            self.frames = plan_online(self.budget, written, self.sizes)
        else:
            self.frames = plan(self.budget, self.frames.steps, written, self.sizes)

    def exhausted(self, step: int, written: int) -> bool:
        """Whether an online plan's budget holds no more steps: the recording ends before `step`
        (noted in the plan)."""
        frames, sizes = self.frames, self.sizes
        if not frames.online or sizes is None or frames.budget is None:
            return False
        if written + sizes.between() <= frames.budget["bytes"] * TARGET:
            return False
        frames.ended = step
        return True

    def warnings(self) -> List[str]:
        if self.frames.ended is None:
            return []
        return ["the budget of %s held %d steps: the recording ended there and the program ran on unrecorded (give a "
                "larger --budget, or --steps)" % (_size(self.frames.budget["bytes"]) if self.frames.budget else "?",
                                                  self.frames.ended)]

    def keyframe(self, step: int, written: int) -> bool:
        """Whether step `step` is kept whole; a planned keyframe that would no longer leave room
        for the rest of the recording is kept as digests (and listed as skipped). Decided once a
        step (before its run, where the run depends on it), then asked again."""
        if self._decided is None or self._decided[0] != step:
            self._decided = (step, self._decide(step, written))
        return self._decided[1]

    def _decide(self, step: int, written: int) -> bool:
        if self.frames.online:
            assert self.sizes is not None
            return online_keyframe(self.frames, step, written, self.sizes)
        if not self.frames.keyframe(step):
            return False
        if self.sizes is not None and not room(self.frames, step, written, self.sizes):
            self.frames.skipped.append(step)
            return False
        return True


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return "%.0f %s" % (n, unit) if unit == "B" else "%.1f %s" % (n, unit)
        n /= 1000.0
    return "%.1f TB" % n


def measured(values: Mapping[str, Any], estimate: Any) -> StepSizes:
    """StepSizes from one step's values ("kind/name" -> array), `estimate(value, light)` giving a
    value's stored bytes whole, `light`: of one of LIGHT_KINDS)."""
    light, whole, digest = 0, {}, {}  # type: int, Dict[str, int], Dict[str, int]
    for key, value in values.items():
        kind = split_key(key)[0]
        stored = estimate(value, light=kind in LIGHT_KINDS)
        if kind in LIGHT_KINDS:
            light += stored
            continue
        whole[kind] = whole.get(kind, 0) + stored
        shape, itemsize = getattr(value, "shape", ()), getattr(getattr(value, "dtype", None), "itemsize", 8)
        digest[kind] = digest.get(kind, 0) + digest_bytes(shape, itemsize)
    return StepSizes(light, whole, digest, len(values))


def written(writer: Any) -> int:
    """A golden writer's bytes so far, HDF5's own per value included (what a budget counts)."""
    return writer.stored_bytes + writer.stored_values * BYTES_PER_VALUE
