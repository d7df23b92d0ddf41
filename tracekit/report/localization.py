"""What `tracekit.tf2.localize` found, as data, and its text: the first step whose own (local)
error exceeds the tolerance, the first stage and tensor inside it, whether the port only
drifted before it, and the one-step reproduction."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional

from ..keys import step_label
from .comparison import STAGES, headline
from .fingerprints import fingerprint
from .hints import slip
from .judged import SHOWN_STEPS, arbitration_lines, raced_lines
from .reported import Reported
from .sources import divergence_source, fingerprint_lines


@dataclass
class Localization:
    """plain: the port from its own state; state: teacher-forced by state; taps: also forced at
    every tap, over the steps up to `step` (None when the golden has no taps or no step fails)."""

    golden: str
    plain: Reported
    state: Reported
    taps: Optional[Reported] = None
    step: Optional[int] = None  # the first step whose local error exceeds the tolerance (None: none)
    key: Optional[str] = None  # the first tensor over it in that step, in data-flow order
    reproduction: Optional[str] = None  # a one-step golden of that step (store/excerpt.py)
    script: Optional[str] = None  # the lines that replay it
    reproduces: Optional[bool] = None  # the reproduction, replayed, fails as the forced replay did there
    reproduced: Optional[str] = None  # what the reproduction did, replayed

    @property
    def ok(self) -> bool:
        """No step of the port computes differently from the golden's on its own."""
        return self.step is None

    @property
    def drift_before(self) -> bool:
        """The port run from its own state failed before `step` (or failed although no step
        does on its own): earlier steps only accumulated differences within the tolerance."""
        first = self.plain.first_divergence
        return first is not None and (self.step is None or first.step < self.step)

    def report(self) -> str:
        return "\n".join(lines(self))

    def to_dict(self) -> Dict[str, Any]:
        """Plain, JSON-serializable data: the finding, and the three comparisons without their
        per-step statistics (each as Comparison.to_dict)."""
        return {"golden": self.golden, "ok": self.ok, "step": self.step, "key": self.key,
                "drift_before": self.drift_before, "reproduction": self.reproduction, "script": self.script,
                "reproduces": self.reproduces, "reproduced": self.reproduced,
                "fingerprints": [asdict(f) for f in self.state.fingerprints],
                "plain": self.plain.to_dict(by_step=False),
                "state": self.state.to_dict(by_step=False),
                "taps": None if self.taps is None else self.taps.to_dict(by_step=False)}

    def write_html(self, path: str) -> str:
        """The port from its own state as the HTML report, with each step's own (teacher-forced)
        error next to it."""
        return self.plain.write_html(path, local=None if self.state is self.plain else self.state)


def lines(found: Localization) -> List[str]:
    plain = found.plain.first_divergence
    out = ["localize %s:" % found.golden,
           "  from its own state:   %s" % ("MATCH" if found.plain.ok else headline(found.plain)),
           "  each step forced:     %s" % ("MATCH" if found.state.ok else headline(found.state))]
    if found.taps is not None:
        out.append("  each tap forced too:  %s" % ("MATCH" if found.taps.ok else headline(found.taps)))
    if found.state.raced:
        out.append("the TF1 step raced at %d step(s) of the forced replay (excused, not the port's):"
                   % len(found.state.raced))
        out += raced_lines(found.state)
    arbitrated = found.state.arbitration.steps if found.state.arbitration is not None else []
    if arbitrated:
        out.append("the float64 arbiter judged %d failing step(s) of the forced replay:" % len(arbitrated))
        for arbitration in arbitrated[:SHOWN_STEPS]:
            out += arbitration_lines(arbitration)
    if found.step is None:
        raced = [r.step for r in found.state.raced]
        if plain is None:
            out.append("the port matches the golden: nothing to localize")
        elif raced and plain.step >= raced[0]:
            out.append("every step matches on its own, except where the TF1 step raced: the failure from its own state "
                       "at %s follows the race at %s (the golden trained that step at the next step's rate), not a step "
                       "of the port's that computes differently" % (step_label(plain.step), step_label(raced[0])))
        elif arbitrated:
            out.append("every step matches on its own, or fails only where the float64 arbiter explains it: the "
                       "failure from its own state at %s is drift and discontinuities that round-off crossed, not a "
                       "step that computes differently. Judge it with tracekit.tf2.check(golden, make_port=...), "
                       "which weighs the drift against perturbed replays" % step_label(plain.step))
        else:
            out.append("every step matches on its own: the failure at %s is drift, round-off the optimizer "
                       "accumulated over earlier steps, not a step that computes differently. Compare with a training "
                       "tolerance (Tolerance.training()), or replay with forcing='state'"
                       % step_label(plain.step))
        return out
    kind = (found.key or "").partition("/")[0]
    out.append("first local error: %s, %s (%s)" % (step_label(found.step), found.key, STAGES.get(kind, kind)))
    out += ["  " + line for line in divergence_source(found.state)
            if found.state.first_divergence is not None and found.state.first_divergence.key == found.key]
    out += ["  " + line for line in fingerprint_lines(found.state, fingerprint)]
    if found.state.first_divergence is not None and found.state.first_divergence.key == found.key:
        out += ["  " + slip(hint) for hint in found.state.slips]  # a race on the last step, say: none to verify it
    if found.drift_before:
        out.append("  earlier steps only drifted: from its own state the port already failed at %s, but each of "
                   "those steps matches on its own" % step_label(plain.step))
    if found.reproduction is not None:
        out.append("one-step reproduction: %s%s" % (found.reproduction, "" if found.reproduces is None else
                                                    " (replayed, %s%s)" % (found.reproduced, "" if found.reproduces
                                                                           else ": NOT as the forced replay")))
    if found.script is not None:
        out.append("replay it with: python %s" % found.script)
    return out
