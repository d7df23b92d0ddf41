"""Seed control with the semantics of `tf.compat.v1.keras.utils.DeterministicRandomTestTool`,
for TF 1.15, which has no such tool.

Inside `SeedControl(seed, mode)`, the graph seed is `seed` and every stateful random
op created asks `random_seed.get_seed` for its seeds and gets `(seed, op_seed)`:
- "constant": op_seed is `operation_seed` (0 unless set) for every op, and the
  global seed is reset to op_seed before each op, as the tool does;
- "num_random_ops": op_seed counts the random ops created so far (0, 1, 2, ...);
  using an op seed a second time raises SeedReuseError.
The graph must be built inside the scope for this to apply.
"""

from __future__ import annotations

import sys
from enum import Enum
from typing import Any, Optional, Set, Tuple

from ..errors import SeedReuseError, UsageError


class SeedMode(str, Enum):
    CONSTANT = "constant"
    NUM_RANDOM_OPS = "num_random_ops"

    @classmethod
    def parse(cls, value: "str | SeedMode | None") -> "Optional[SeedMode]":
        if value is None:
            return None
        try:
            return cls(value)
        except ValueError:
            raise UsageError("seed mode must be 'constant' or 'num_random_ops', got %r" % (value,)) from None


class SeedControl:
    def __init__(self, tf: Any, seed: int, mode: SeedMode) -> None:
        self._tf = tf
        self.seed = int(seed)
        self.mode = SeedMode(mode)
        self.operation_seed = 0
        self._observed: Set[int] = set()
        self._module = sys.modules[tf.compat.v1.get_seed.__module__]
        self._original: Any = None

    def __enter__(self) -> "SeedControl":
        self._tf.compat.v1.set_random_seed(self.seed)
        self._original = self._module.get_seed
        self._module.get_seed = self._get_seed
        return self

    def __exit__(self, *exc: Any) -> None:
        self._module.get_seed = self._original

    def _get_seed(self, op_seed: Any = None) -> Tuple[int, int]:
        seed = self.operation_seed
        if self.mode == SeedMode.CONSTANT:
            self._tf.compat.v1.set_random_seed(seed)
        else:
            if seed in self._observed:
                raise SeedReuseError(
                    "seed mode num_random_ops: operation seed %d is used a second time; random numbers "
                    "could not be told apart from the earlier op's. Do not set operation_seed to a value "
                    "the count has already passed" % seed)
            self._observed.add(seed)
            self.operation_seed += 1
        return self.seed, seed

    def describe(self) -> dict:
        return {"seed": self.seed, "mode": self.mode.value, "operation_seed": self.operation_seed}
