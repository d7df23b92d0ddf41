"""How the long-golden verdict runs a port (tf2/verdict.py): each call a fresh port from its
factory, as live.py builds them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ..comparison.result import Comparison
from ..store import Trace
from .apart import Apart
from .arbiter import MakePort, ReplayOne


@dataclass(frozen=True)
class PortRuns:
    """How the verdict runs the port, each time a fresh one from its factory."""

    check: Callable[[], Comparison]  # the teacher-forced replay, compared as it runs
    # (nudge seed or None, out, steps restarting from the golden's state, steps captured in full, steps to run
    # or None for all) -> a written replay from its own state
    replay: Callable[[Optional[int], str, "frozenset[int]", Optional[Callable[[int], bool]], Optional[int]], Trace]
    # (nudge seed, a replay written from the port's own state, steps restarting, steps captured in full) -> a
    # replay from its own state nudged, compared exactly with that one as it runs
    against: Callable[[int, Trace, "frozenset[int]", Optional[Callable[[int], bool]]], Comparison]
    replay_one: ReplayOne
    make_port: MakePort
    # runs a call that makes ports (a run, the arbiter's steps): in a process of its own where that is safe
    apart: Apart = field(default_factory=Apart)
