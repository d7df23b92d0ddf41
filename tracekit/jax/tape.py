"""The golden's random draws fed to a JAX port, in the order it draws them (the draws
themselves: replay/draws.py).

For the replay's length `jax.random.bernoulli` (which flax's Dropout calls with the keep
probability), `jax.random.uniform` and `jax.random.normal` take their numbers from the tape, keys
ignored: a bernoulli draw is TF1's dropout mask (kept where the uniform draw >= the rate), a
uniform draw in a range is TF1's [0, 1) draw scaled to it, a normal draw is handed as it is. A
jitted step is traced with these in place, and each draw reaches the host through an ordered
io_callback, so the compiled step takes the next step's draws too. An error inside the callback
(a draw the golden does not hold) is kept and raised after the step, naming it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, List, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from ..errors import ReplayError
from ..replay.draws import DrawTape, kept
from ..replay.patched import patched


class Tape(DrawTape):
    """One replay's random tape; `inject` False leaves JAX's randomness alone."""

    def __init__(self, inject: bool) -> None:
        super().__init__(inject, "JAX", "dropout through flax's Dropout or jax.random.bernoulli, other draws through "
                         "jax.random.uniform/normal", "jax.random's other distributions")
        self.error: Optional[ReplayError] = None

    def check(self, index: int) -> None:
        error, self.error = self.error, None
        if error is not None:
            raise error
        super().check(index)

    def _host(self, what: str, shape: Tuple[int, ...], kind: str, dtype: Any, rate: Optional[float]) -> Any:
        """A draw the compiled step fetches from the host as it runs."""
        out = jax.ShapeDtypeStruct(shape, np.bool_ if rate is not None else dtype)

        def fetch() -> np.ndarray:
            try:
                value = self.next(what, shape, kind, rate)
            except ReplayError as error:
                self.error = self.error or error
                return np.zeros(shape, out.dtype)
            return kept(value, rate) if rate is not None else np.asarray(value, dtype=out.dtype)
        return io_callback(fetch, out, ordered=True)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if not self.inject:
            yield
            return
        tape = self

        # `placement`: where the draw is laid out (out_sharding, as flax NNX's Dropout passes it), not its numbers
        def bernoulli(key: Any, p: Any = 0.5, shape: Any = None, mode: Any = None, **placement: Any) -> Any:
            shape = tuple(jnp.shape(p)) if shape is None else tuple(shape)
            return tape._host("jax.random.bernoulli", shape, "uniform", np.float32, 1.0 - float(p))

        def uniform(key: Any, shape: Any = (), dtype: Any = float, minval: Any = 0.0, maxval: Any = 1.0,
                    **placement: Any) -> Any:
            # TF1 records its RandomUniform op's [0, 1) draw; a range is scaled from it, as TF scales it
            drawn = tape._host("jax.random.uniform", tuple(shape), "uniform", jax.dtypes.canonicalize_dtype(dtype),
                               None)
            plain = all(isinstance(v, (int, float)) for v in (minval, maxval)) and (minval, maxval) == (0.0, 1.0)
            return drawn if plain else drawn * (maxval - minval) + minval

        def normal(key: Any, shape: Any = (), dtype: Any = float, **placement: Any) -> Any:
            return tape._host("jax.random.normal", tuple(shape), "normal", jax.dtypes.canonicalize_dtype(dtype), None)

        replaced: List[Tuple[Any, str, Callable[..., Any]]] = [
            (jax.random, "bernoulli", bernoulli), (jax.random, "uniform", uniform), (jax.random, "normal", normal)]
        with patched(replaced):
            yield
