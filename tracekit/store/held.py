"""What each kind of step of a golden records, and what a golden that records steps without
inputs or a loss does not hold.

The recorder writes meta["held"]: for each kind of step (the train ops its runs ran), how many
inputs, random draws, taps, losses, learning rates and gradients a step of it records. A step
with no input and no loss updates variables from state alone: gradients accumulated by other
runs and applied here, say. Its golden can check the update, but nothing in it shows that a
port computed anything, so the recorder warns, `show` and `verify` say so, and a comparison that
compared no input and no loss is not a match. Python 3.7 syntax, no numpy.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

from ..keys import HELD

HELD_KINDS = ("input", "random", "tap", "loss", "lr", "grad")
_WORDS = {"input": "inputs", "random": "random draws", "tap": "taps", "loss": "losses", "lr": "learning rates",
          "grad": "gradients"}


def held_gaps(kind: str, counts: Mapping[str, int]) -> List[str]:
    """What a step of `kind` that records `counts` lacks, as warnings (none when it records inputs
    and a loss)."""
    lacking = [_WORDS[k] for k in ("input", "loss") if not counts.get(k)]
    if not lacking:
        return []
    why = {("inputs",): "the run is fed nothing and reads no input pipeline",
           ("losses",): "the run differentiates nothing",
           ("inputs", "losses"): "the run is fed nothing and differentiates nothing"}[tuple(lacking)]
    return ["the training steps of %s record no %s: %s, so its updates use values other runs computed (gradients "
            "accumulated over several runs, say); a replay of such a golden compares the update alone, and a "
            "comparison with no input and no loss is not a match. Name the run that is the training step (tracekit "
            "record --train-op NAME) if it is another" % (kind or "this run", " and no ".join(lacking), why)]


def held(meta: Mapping[str, Any]) -> Dict[str, Dict[str, int]]:
    """{kind of step: {tensor kind: count}} as a golden records it ({} for goldens before it did)."""
    stored = meta.get(HELD)
    if not isinstance(stored, Mapping):
        return {}
    return {str(kind): {k: int(v) for k, v in counts.items() if isinstance(v, int)}
            for kind, counts in stored.items() if isinstance(counts, Mapping)}


def held_lines(meta: Mapping[str, Any]) -> List[str]:
    """What each kind of step records, a line each, and what a kind lacks."""
    lines = []
    for kind, counts in held(meta).items():
        lines.append("%s: %s" % (kind or "(untitled)", ", ".join("%s %d" % (_WORDS[k], counts.get(k, 0))
                                                                  for k in HELD_KINDS)))
        lines += ["  WARNING " + gap for gap in held_gaps(kind, counts)]
    return lines


def blind(meta: Mapping[str, Any]) -> List[str]:
    """The kinds of step that record neither an input nor a loss."""
    return [kind for kind, counts in held(meta).items() if not counts.get("input") and not counts.get("loss")]


def uncompared(meta: Mapping[str, Any]) -> str:
    """Why a comparison that compared no input and no loss vouches for nothing (a golden's meta)."""
    kinds = blind(meta)
    why = ("the golden's steps of %s record neither: they update variables from values other runs computed"
           % ", ".join(kinds)) if kinds else "neither the golden nor the replay held one at the steps compared"
    return ("no input and no loss was compared (%s): a port that never ran its model could match the rest, so "
            "this is no match" % why)
