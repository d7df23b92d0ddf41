"""The text of a long golden's verdict (tf2/verdict.py): the local view with what the float64
arbiter found at each failing step, the drift view, and which of the two decided."""

from __future__ import annotations

from typing import List

from ..comparison.arbiter import Arbitration
from ..comparison.result import Comparison
from ..keys import step_label

SHOWN_STEPS = 8  # arbitrated steps listed in full
SHOWN_FLIPS = 3  # flipped layers listed per step


def long_golden_advice(steps: int) -> str:
    """What a long golden judged plain should say first: a correct port's trajectory leaves it."""
    return ("a golden of %d steps, judged plain (the port from its own state): a correct port's trajectory leaves a "
            "long golden where round-off crosses a discontinuity (a ReLU, a max). For the judged verdict (each "
            "step's own error, the float64 arbiter, a drift envelope) pass make_port= (a fresh (model, step) per "
            "call) to tracekit.tf2.check, or run tracekit check GOLDEN MODULE:FUNCTION" % steps)


def decided_by(result: Comparison) -> str:
    """Which view decided a local verdict: "local", "drift", or "both" (they agree it matches);
    "drift" for an envelope verdict, which has that view alone."""
    if result.judged == "envelope":
        return "drift"
    if result.first_divergence is not None or result.missing or result.short is not None:
        return "local"
    if result.drift is not None and not result.drift.ok:
        return "drift"
    return "both"


def arbitration_lines(arbitration: Arbitration) -> List[str]:
    lines = ["  " + arbitration.describe()]
    flips = list(arbitration.flips) + list(arbitration.golden_flips)
    lines += ["    " + flip.describe() for flip in flips[:SHOWN_FLIPS]]
    if len(flips) > SHOWN_FLIPS:
        lines.append("    ... and %d more layers" % (len(flips) - SHOWN_FLIPS))
    if not arbitration.explained and arbitration.also:
        lines.append("    the float64 port also disagrees on %s" % ", ".join(t.key for t in arbitration.also[:4]))
    return lines


def raced_lines(result: Comparison) -> List[str]:
    """The steps a race in the TF1 step explains (comparison/races.py), each with its evidence."""
    return ["  " + raced.describe() for raced in result.raced[:SHOWN_STEPS]] + \
        (["  ... and %d more raced steps" % (len(result.raced) - SHOWN_STEPS)] if len(result.raced) > SHOWN_STEPS else [])


def judged_lines(result: Comparison) -> List[str]:
    """The lines a local or envelope verdict adds to the report; none for a plain one."""
    if result.judged == "envelope":
        return ["judged: by the envelope (the golden keeps its training state whole only at keyframes: the port from "
                "its own state, restarted from the golden's after each keyframe, against the spread of replays moved "
                "at every step; between keyframes, digest against digest)"]
    if result.judged != "local":
        return []
    lines = ["judged: local (a golden of %d steps: each step's own error, teacher-forced; the float64 arbiter on "
             "the steps that fail; the drift from the port's own state against an envelope of perturbed replays)"
             % result.golden_steps]
    lines += raced_lines(result)
    arbitrated = result.arbitration.steps if result.arbitration is not None else []
    if not arbitrated:
        lines.append("local errors: none%s" % ("" if result.first_divergence is None
                                                else " arbitrated (the initial state differs)"))
    else:
        explained = [a for a in arbitrated if a.explained]
        lines.append("local errors: %d step(s) arbitrated, %d explained as round-off through a discontinuity "
                     "(arbitration took %.1f s):" % (len(arbitrated), len(explained),
                                                    sum(a.seconds for a in arbitrated)))
        for arbitration in arbitrated[:SHOWN_STEPS]:
            lines += arbitration_lines(arbitration)
        if len(arbitrated) > SHOWN_STEPS:
            lines.append("  ... and %d more steps" % (len(arbitrated) - SHOWN_STEPS))
    drift = result.drift
    if drift is None:
        lines.append("drift: not measured (a local error decides)")
    elif drift.ok:
        crossing = next((a for a in drift.arbitration.steps if a.explained), None) \
            if drift.arbitration is not None else None
        if crossing is None:
            lines.append("drift: inside the envelope (the port from its own state, %d steps)" % drift.steps)
        else:
            lines.append("drift: inside the envelope up to step %d (the port from its own state); from there the two "
                         "trajectories are not comparable element by element:" % (crossing.step - 1))
            lines += arbitration_lines(crossing)
    else:
        first = drift.first_divergence
        where = "%s, %s" % (step_label(first.step), first.key) if first is not None else \
            (drift.short or "missing %s" % ", ".join(drift.missing[:3]))
        lines.append("drift: OUTSIDE the envelope at %s (the port from its own state%s)"
                     % (where, "" if first is None else ": max abs %.3g, %.3g ulps" % (first.stats.max_abs,
                                                                                      first.stats.ulps)))
    lines.append("decided by: %s" % {"local": "the local view", "drift": "the drift view",
                                     "both": "both views (they agree)"}[decided_by(result)])
    return lines
