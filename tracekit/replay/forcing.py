"""Teacher forcing's own check: what it set reads back as the golden's state, and what of that
state it could not set, with why (the replay's record, which the report states)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Sequence

import numpy as np

from ..errors import ReplayError
from ..keys import split_key


# A forced value read back may differ from the golden's by the round-off of its conversion to the
# port's convention (TF1's momentum accumulator, scaled by the learning rate and back; TF1's LSTM
# bias, its forget gate's offset added and taken away): ulps of the larger scale it had on the way.
READ_BACK_ULPS = 4
READ_BACK_CHUNK = 1 << 20  # elements


def forced_record(golden: Any, runner: Any, index: int, state: Mapping[str, Any],
                  forced: Sequence[str]) -> Dict[str, Any]:
    """Check the first forced step: every key set reads back as the golden's value (else a
    ReplayError: the forcing did not reach what the step uses). Returns what was forced, by
    kind, and what of the golden's state was not, with why: the replay's record of it."""
    read = dict(runner.read_state())
    scales = runner.port_scales(state)
    wrong = []
    for key in forced:
        want, got = np.asarray(state[key]), read.get(key)
        if got is None or np.shape(got) != want.shape or not reads_back(np.asarray(got), want, scales.get(key, 0.0)):
            wrong.append(key)
    if wrong:
        raise ReplayError("%s, step %d: teacher forcing set %d tensors of the golden's state into the port, and %d "
                          "read back otherwise (%s): the port variable mapped to it does not keep what is assigned "
                          "(a dtype that rounds it, a conversion that does not undo itself)"
                          % (golden.path, index, len(forced), len(wrong), ", ".join(wrong[:5])))
    kinds: Dict[str, int] = {}
    for key in forced:
        kinds[split_key(key)[0]] = kinds.get(split_key(key)[0], 0) + 1
    missing = {key: runner.not_replayed.get(key, "no port variable holds it") for key in state if key not in set(forced)}
    return {"step": index, "set": kinds, "not_set": missing}


def reads_back(got: np.ndarray, want: np.ndarray, port_scale: float = 0.0) -> bool:
    """Whether a value set into the port reads back as `want`: exactly for integers, else within
    READ_BACK_ULPS of the larger of its scale and the port's (`port_scale`)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False
    if not np.issubdtype(want.dtype, np.floating):
        return bool(np.array_equal(got, want))
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, port_scale)  # |x| is exact in its own dtype
    allowed = READ_BACK_ULPS * float(np.finfo(want.dtype).eps) * scale
    flat_got, flat_want = got.reshape(-1), want.reshape(-1)
    for start in range(0, flat_want.size, READ_BACK_CHUNK):  # float64 a chunk at a time, not the whole tensor
        part = slice(start, start + READ_BACK_CHUNK)
        if not np.all(np.abs(flat_got[part].astype(np.float64) - flat_want[part]) <= allowed):
            return False
    return True
