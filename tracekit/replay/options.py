"""What a replay is asked to do: tracekit.tf2.replay()'s options as one frozen object, checked
once, when it is made. The facades (replay, check, localize, calibrate, the pytest plugin)
make one; the runner and the loop read it."""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Dict, Mapping, Optional, Sequence

from ..errors import UsageError

INIT_MODES = ("golden", "seed")
RANDOM_MODES = ("tape", "seed", "none")
FORCING_MODES = ("none", "state", "taps")
INPUT_APIS = ("dataset", "function")  # experimental_distribute_dataset, distribute_datasets_from_function


@dataclass(frozen=True)
class ReplayOptions:
    """tracekit.tf2.replay()'s options (its docstring says what each does); `steps`, `every` and
    `forcing` are the loop's, the rest the runner's."""

    model: Any = None
    variables: Any = None
    var_map: Any = "auto"
    init: str = "golden"
    random: str = "tape"
    steps: Optional[int] = None
    inputs: Optional[Mapping[str, str]] = None
    convert: Sequence[Any] = ()  # replay.conversions.Conversion
    progress: Optional[Callable[[int, int], None]] = None
    strategy: Any = None
    input_api: str = "dataset"
    global_batch_size: Optional[int] = None
    determinism: Optional[bool] = None
    tf32: Optional[bool] = None
    grappler: "Mapping[str, bool] | bool | None" = None
    every: int = 1
    forcing: str = "none"
    # The options a caller named (of(), but()), defaults among them: a port's own may not repeat them.
    named: "frozenset[str]" = field(default=frozenset(), repr=False, compare=False)

    def __post_init__(self) -> None:
        check_usage(self.init, self.random)
        check_every(self.every)
        check_forcing(self.forcing)
        if self.input_api not in INPUT_APIS:
            raise UsageError("input_api must be 'dataset' (strategy.experimental_distribute_dataset) or 'function' "
                             "(strategy.distribute_datasets_from_function), got %r" % (self.input_api,))
        if self.steps is not None and (isinstance(self.steps, bool) or not isinstance(self.steps, numbers.Integral)
                                       or self.steps < 0):
            raise UsageError("steps must be a whole number of steps (>= 0) or None, got %r" % (self.steps,))
        object.__setattr__(self, "convert", tuple(self.convert))

    @classmethod
    def names(cls) -> "frozenset[str]":
        """replay()'s option names."""
        return frozenset(f.name for f in fields(cls)) - {"named"}

    @classmethod
    def of(cls, options: Mapping[str, Any], where: str, fixed: "frozenset[str]" = frozenset()) -> "ReplayOptions":
        """Options by name, as a caller hands them on (check(**options)); a name replay() does not
        take, or one `where` sets itself (`fixed`), is a UsageError saying what it takes."""
        allowed = cls.names() - fixed
        unknown = sorted(set(options) - allowed)
        if unknown:
            but = " but %s, which it sets itself" % ", ".join(sorted(fixed)) if fixed else ""
            raise UsageError("%s: cannot pass on option(s) %s; it takes replay()'s options%s: %s"
                             % (where, ", ".join(unknown), but, ", ".join(sorted(allowed))))
        return cls(named=frozenset(options), **options)

    def but(self, **changes: Any) -> "ReplayOptions":
        """A copy with `changes` (checked again)."""
        return replace(self, named=self.named | frozenset(changes), **changes)

    def merged(self, own: Mapping[str, Any], where: str, fixed: "frozenset[str]" = frozenset(),
               clash: str = "error") -> "ReplayOptions":
        """These options and a port's own (the third item make_port() returns: options naming its
        objects), checked as a caller's are. A name given by both is a UsageError (clash="error":
        localize, calibrate, check), the port's (clash="own": the long-golden verdict's fresh
        ports) or the caller's (clash="caller": the pytest plugin, where the test's options win)."""
        ReplayOptions.of(own, where, fixed)
        given = self.given()
        twice = sorted(name for name in own if name in given)
        if twice and clash == "error":
            raise UsageError("replay option(s) %s given both by make_port() and by the caller" % ", ".join(twice))
        return self.but(**{k: v for k, v in own.items() if clash != "caller" or k not in given})

    def given(self) -> Dict[str, Any]:
        """The options a caller named or set to other than their defaults, by name."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "named" and (
            f.name in self.named or not _is_default(getattr(self, f.name), f.default))}


def _is_default(value: Any, default: Any) -> bool:
    if value is default:
        return True
    if isinstance(default, tuple):  # convert=(): any empty sequence
        return isinstance(value, tuple) and not value
    return isinstance(default, (str, int)) and type(value) is type(default) and value == default


def check_usage(init: str, random: str) -> None:
    if init not in INIT_MODES:
        raise UsageError("init must be 'golden' (load the golden's initial state) or 'seed', got %r" % (init,))
    if random not in RANDOM_MODES:
        raise UsageError("random must be 'tape', 'seed' or 'none', got %r" % (random,))


def check_every(every: Any) -> int:
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise UsageError("every must be an integer >= 1 (capture every K-th step in full), got %r" % (every,))
    return every


def check_forcing(forcing: Any) -> str:
    if forcing not in FORCING_MODES:
        raise UsageError("forcing must be 'none' (the port runs from its own state), 'state' (each step starts from "
                         "the golden's state after the step before) or 'taps' (also each tap hands the rest of the "
                         "step the golden's value), got %r" % (forcing,))
    return forcing
