"""The tolerance profiles by name, and the one reading of a tolerance as users write it (a
Tolerance, a profile name, "auto", or a TOML file): the CLI's --profile/--tolerance and the
pytest plugin's tolerance= and ini value resolve through resolve_tolerance, and their help
texts list the names from here."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Dict, Tuple

from ..errors import UsageError
from .tolerance import Tolerance

AUTO = "auto"  # chosen from the two traces' environments (envdiff.default_profile)


@dataclass(frozen=True)
class ProfileSpec:
    """A named tolerance: how to make it, and what it is for, in a few words."""

    make: Callable[[], Tolerance]
    summary: str


PROFILES: Dict[str, ProfileSpec] = {
    "default": ProfileSpec(Tolerance, "float32 atol=1e-5, rtol=1e-6: a port against its golden"),
    "training": ProfileSpec(Tolerance.training, "step 0 at the default, later steps also a port's measured "
                                                "round-off growth"),
    "round-off": ProfileSpec(Tolerance.roundoff, "the same code on another machine: the cross-machine bound"),
    "exact": ProfileSpec(Tolerance.exact, "bit for bit"),
    "mixed-precision": ProfileSpec(Tolerance.mixed_precision, "a port under mixed_float16 against a float32 golden"),
    "gpu": ProfileSpec(Tolerance.gpu, "a port on a GPU against a golden recorded without one"),
}


def profile_names() -> Tuple[str, ...]:
    """The profile names in the order help texts and messages list them (AUTO aside)."""
    return tuple(sorted(PROFILES))


def profile(name: str) -> Tolerance:
    """The named profile's tolerance."""
    spec = PROFILES.get(name)
    if spec is None:
        raise UsageError("unknown tolerance profile %r; use %s" % (name, ", ".join(profile_names())))
    return spec.make()


def check_spec(spec: str) -> None:
    """Raise unless `spec` names a profile, AUTO or a TOML file (whose reading comes later)."""
    if spec != AUTO and spec not in PROFILES and not spec.endswith(".toml"):
        raise _problem(spec)


def resolve_tolerance(spec: "Tolerance | str | os.PathLike[str] | None", root: str) -> "Tolerance | str | None":
    """What a comparison takes (compare's `tolerance`) from what a user wrote: a Tolerance as it
    is; a TOML file (relative to `root`) read; a profile name kept (the comparison reports it by
    name); AUTO or None as None (chosen from the two traces). Anything else is a UsageError."""
    if spec is None or isinstance(spec, Tolerance):
        return spec
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        raise _problem(spec)
    check_spec(spec)
    if spec == AUTO:
        return None
    if spec.endswith(".toml"):
        return Tolerance.load(spec if os.path.isabs(spec) else os.path.join(root, spec))
    return spec


def _problem(spec: object) -> UsageError:
    return UsageError("tolerance %r: give a Tolerance, a TOML file, or one of %s"
                      % (spec, ", ".join((AUTO,) + profile_names())))
