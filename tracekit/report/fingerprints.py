"""Text of the slip fingerprints (comparison/fingerprints.py): the transformation that turns the
golden's update into the port's, with its parameter, the tensors it explains and what to change."""

from __future__ import annotations

from typing import Sequence

from ..comparison.fingerprints import (BIAS_CORRECTION, DECAY_ADDED, DECAY_MISSING, DECAY_RATE, EPSILON,
                                       GRAD_SCALE, L2_IN_LOSS, LR_FACTOR, SIGN, Fingerprint)
from ..comparison.loss_terms import LOSS_TERM
from ..keys import split_key, step_label

NAMES_SHOWN = 4


def _names(keys: Sequence[str]) -> str:
    names = [split_key(key)[1] for key in keys]
    shown = ", ".join(names[:NAMES_SHOWN])
    more = " and %d more" % (len(names) - NAMES_SHOWN) if len(names) > NAMES_SHOWN else ""
    return "%d variable%s (%s%s)" % (len(names), "" if len(names) == 1 else "s", shown, more)


def _decay(hint: Fingerprint) -> str:
    """lr x rate x var, or the coefficient where the golden has no one learning rate."""
    lr = hint.detail.get("lr")
    return ("lr x %.3g x var (lr %.3g)" % (hint.port or hint.golden, lr) if lr is not None
            else "%.3g x var" % (hint.port or hint.golden))


def fingerprint(hint: Fingerprint) -> str:
    """One fingerprint as a line: what the port does otherwise, where, how closely, what to do."""
    # what the fit left is within the comparison's tolerance and under a quarter of the difference
    where, fit = step_label(hint.step), "explained within the tolerance (%.2g ulps of the scale left)" % hint.ulps
    d = hint.detail
    if hint.code == DECAY_ADDED:
        return ("named cause: weight decay applied where TF1 applies none, on %s: at %s the port's update differs "
                "from TF1's by %s, %s. Exclude these variables from the port's weight decay as the TF1 optimizer "
                "does" % (_names(hint.keys), where, _decay(hint), fit))
    if hint.code == DECAY_MISSING:
        return ("named cause: weight decay left out on %s: at %s TF1's update subtracts %s, the port's nothing, %s. "
                "Decay these variables as the TF1 optimizer does" % (_names(hint.keys), where, _decay(hint), fit))
    if hint.code == DECAY_RATE:
        return ("named cause: another weight-decay rate on %s: at %s TF1 decays by %.3g, the port by %.3g (x lr "
                "where the golden has one learning rate), %s" % (_names(hint.keys), where, hint.golden, hint.port, fit))
    if hint.code == EPSILON:
        return ("named cause: the optimizer's epsilon. At %s the port's update of %s fits epsilon=%.2g, TF1's "
                "epsilon=%.2g (in m / (sqrt(v) + epsilon), Adam's moments verified from the golden's gradient), %s. "
                "Pass epsilon=%.2g" % (where, _names(hint.keys), hint.port, hint.golden, fit, hint.golden))
    if hint.code == BIAS_CORRECTION:
        corrects = hint.port == 1.0
        return ("named cause: Adam's bias correction. At %s the port's update of %s is %.4g x TF1's, the correction "
                "sqrt(1 - beta_2^t) / (1 - beta_1^t) at t=%d (betas %.3g, %.4g, verified from the moments), %s: %s"
                % (where, _names(hint.keys), d.get("factor", float("nan")), int(d.get("t", 0)), d.get("beta_1", 0.0),
                   d.get("beta_2", 0.0), fit,
                   "the port corrects m and v, TF1's update does not (google-research/bert's AdamWeightDecay, for "
                   "one): write the update without the correction" if corrects else
                   "TF1's optimizer corrects m and v, the port's does not: use an optimizer that corrects them "
                   "(Keras Adam)"))
    if hint.code == LR_FACTOR:
        return ("named cause: the learning rate. At %s the port's update of %s is %.4g x TF1's, %s: check the rate "
                "and its schedule (tracekit compares the rate where the port's step returns it)"
                % (where, _names(hint.keys), hint.port, fit))
    if hint.code == SIGN:
        return ("named cause: the update's sign. At %s the port moves %s opposite to TF1, %s: a gradient or a loss "
                "with its sign flipped (ascent where TF1 descends)" % (where, _names(hint.keys), fit))
    if hint.code == GRAD_SCALE:
        batch = d.get("batch")
        why = (": a factor of the batch size (%d), the loss summed where TF1 averages it or the reverse"
               % batch if batch else ": the loss scaled, or the gradients clipped otherwise")
        return ("named cause: the gradients of %s are %.4g x TF1's at %s, %s%s" % (_names(hint.keys), hint.port, where,
                                                                                fit, why))
    if hint.code == L2_IN_LOSS:
        return ("named cause: an L2 term in the loss. At %s the port's gradients of %s differ from TF1's by %.3g x "
                "var (TF1's by %.3g x var), %s: the port %s an L2 penalty (or decays through its loss where TF1 "
                "decays in the update)" % (where, _names(hint.keys), hint.port, hint.golden, fit,
                                           "adds" if abs(hint.port) > abs(hint.golden) else "leaves out"))
    if hint.code == LOSS_TERM:
        factor = d.get("factor", 1.0)
        what = {-1.0: "its sign flipped", 0.0: "left out"}.get(factor, "%g x TF1's" % factor)
        return ("named cause: one part of the loss. At %s, %s is TF1's plus (%g - 1) x its term %d of %d (%s, times %g "
                "in TF1's loss): that term is %s in the port, a coefficient of %g where TF1's is %g. It holds at %d "
                "step(s) from the golden's state, %s" % (
                    where, hint.keys[0], factor, int(d.get("term", 0)) + 1, int(d.get("terms", 0)), d.get("tensor"),
                    hint.golden, what, hint.port, hint.golden, int(d.get("steps", 1)), fit))
    return "named cause: %s at %s on %s, %s" % (hint.code, where, _names(hint.keys), fit)
