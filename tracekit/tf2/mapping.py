"""tracekit map: how a port's variables pair with a golden's, before anything is replayed: each
pairing and the rule that made it, and where some do not pair, the var_map to start from
(replay/proposal.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List

from ..errors import ReplayError
from ..replay.options import ReplayOptions
from ..replay.varmap import explain
from ..store import open_trace
from .drive import _LOCALIZE_SETS, _made
from .tf2_runner import TF2Runner


@dataclass(frozen=True)
class PortMap:
    """Whether every variable paired, and the text that says how (or what to pass as var_map)."""

    ok: bool
    text: str


def map_port(golden: str, make_port: Callable[[], Any]) -> PortMap:
    """Pair the variables of a fresh port from make_port() with the golden's, as a replay would."""
    _, _, options = _made(make_port, ReplayOptions(), _LOCALIZE_SETS)
    with open_trace(golden) as trace:
        try:
            runner = TF2Runner(trace, options)
        except ReplayError as exc:
            return PortMap(False, str(exc))
    lines: List[str] = ["%s: every variable pairs" % golden]
    rows = [(name, cand.name, explain(runner.mapping.how.get(name, ""))) for name, cand in runner.mapping.pairs.items()]
    rows += [(name, cand.name, explain(runner.port_state.mapping.how.get(name, "")) + ", optimizer state")
             for name, cand in runner.port_state.mapping.pairs.items()]
    rows += [(name, conv.describe, "converted") for conv in runner.conversions for name in conv.golden]
    width = max((len(name) for name, _, _ in rows), default=0)
    lines += ["  %-*s  %s  (%s)" % (width, name, port, how) for name, port, how in rows]
    lines += ["  %s: not replayed: %s" % (key, why) for key, why in sorted(runner.not_replayed.items())]
    return PortMap(True, "\n".join(lines))
