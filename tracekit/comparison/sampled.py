"""A step that starts from the golden's whole state but keeps digests (step 0 of a golden
recorded under a size budget, or the step after a keyframe), seen through its sampled elements.

A digest samples the same flat positions of every tensor of one element count (store/digest.py),
so a variable's sample, its gradient's and its slots' line up element for element, and the
state the step started from, held whole, can be cut to the same positions. On those elements an
update is an update: the proportion rule (a weight decay one side applies) and the fingerprints
(fingerprints.py: a learning-rate factor, Adam's epsilon, a decay, an L2 term) fit them as they
fit whole tensors, and to the same tolerance. A fit on a sample says what the sampled elements
did; the report says it was fitted on them (Fingerprint.detail[SAMPLED]).

numpy only.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, Mapping, Optional, Set, Tuple

import numpy as np

from ..store.digest import Digest, positions

SAMPLED = "sampled"  # Fingerprint.detail's key: how many of its tensors it was fitted on samples of


def samples(g_value: Any, a_value: Any) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """The two sides' sampled elements where both are digests of as many elements, sampled (not
    whole); else None."""
    if not (isinstance(g_value, Digest) and isinstance(a_value, Digest)) or g_value.whole or \
            g_value.count != a_value.count or g_value.sample.size != a_value.sample.size:
        return None
    return g_value.sample, a_value.sample


def sampled_values(values: Mapping[str, Tuple[Any, Any]]) -> Tuple[Dict[str, Tuple[Any, Any]], Set[str]]:
    """Each tensor's two values, a pair of digests as their samples; and the keys so taken."""
    out: Dict[str, Tuple[Any, Any]] = {}
    taken: Set[str] = set()
    for key, pair in values.items():
        found = samples(*pair)
        out[key] = pair if found is None else found
        if found is not None:
            taken.add(key)
    return out, taken


def cut(value: Any, count: int) -> Any:
    """A whole value of `count` elements at the positions a digest of it samples, flat; anything
    else as it is."""
    array = np.asarray(value) if isinstance(value, np.ndarray) else None
    if array is None or array.size != count:
        return value
    return array.reshape(-1)[positions(count)]


class SampledStep(Mapping[str, Any]):
    """A recorded step as fingerprints read it: its whole values, and its digests' samples under
    their keys. `counts`: the element count of each key kept as a sample."""

    def __init__(self, step: Any) -> None:
        self._step = step
        self._digests: Dict[str, Digest] = dict(step.digests)
        self.counts = {key: d.count for key, d in self._digests.items() if not d.whole}

    def __getitem__(self, key: str) -> Any:
        found = self._digests.get(key)
        if found is not None:
            return found.value() if found.whole else found.sample
        return self._step[key]

    def __contains__(self, key: object) -> bool:
        return key in self._digests or key in self._step

    def __iter__(self) -> Iterator[str]:
        yield from self._step
        yield from self._digests

    def __len__(self) -> int:
        return len(self._step) + len(self._digests)


def sampled_state(before: Mapping[str, Any], step: SampledStep) -> Dict[str, Any]:
    """The state a step started from, each tensor the step keeps sampled cut to its sample."""
    return {key: cut(value, step.counts[key]) if key in step.counts else value for key, value in before.items()}
