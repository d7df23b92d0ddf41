"""Text of the slip fingerprints (comparison/fingerprints.py): the transformation that turns the
golden's update into the port's, with its parameter, the tensors it explains and what to change."""

from __future__ import annotations

import math
from typing import Optional, Sequence

from ..comparison.activations import ACTIVATION, NORM_EPSILON
from ..comparison.adam_l2 import ADAM_L2
from ..comparison.clipping import CLIP_EACH_NORM, CLIP_NORM, CLIP_VALUE
from ..comparison.corrected import BESSEL, BESSEL_N_EXACT, EPSILON_HAT
from ..comparison.epsilon import EPSILON_INSIDE
from ..comparison.fingerprints import (AVERAGE_RATE, BIAS_CORRECTION, DECAY_ADDED, DECAY_MISSING, DECAY_RATE,
                                       EPSILON, GRAD_SCALE, L2_IN_LOSS, LR_FACTOR, SIGN, VARIANT,
                                       Fingerprint)
from ..comparison.loss_terms import LOSS_TAP, LOSS_TERM
from ..comparison.momentum import MOMENTUM, NESTEROV
from ..comparison.permuted import PERMUTED, TRANSPOSED
from ..comparison.sampled import SAMPLED
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
    sampled = hint.detail.get(SAMPLED)
    return _line(hint) + ("" if not sampled else " (fitted on the elements a digest samples of %d of these tensors: "
                          "the golden keeps digests at this step)" % sampled)


def _line(hint: Fingerprint) -> str:
    # what the fit left is within the comparison's tolerance and under a quarter of the difference
    where, fit = step_label(hint.step), "explained within the tolerance (%.2g ulps of the scale left)" % hint.ulps
    d = hint.detail
    if VARIANT in d and "setting" in d:
        return ("named cause, verified by a replay: %s, in the port's %s. The port %s; %s replayed alone from the "
                "golden's state fails as it is and matches TF1 within the tolerance where it %s" % (
                    hint.code, d["setting"], d.get("port"), where, d[VARIANT]))
    if VARIANT in d:
        return ("named cause, verified by a replay: %s, in %s. The port's conversion %s; %s replayed alone from the "
                "golden's state fails as it is and matches TF1 within the tolerance where the conversion %s" % (
                    hint.code, d.get("conversion"), d.get("port"), where, d[VARIANT]))
    if hint.code == DECAY_ADDED:
        return ("named cause: weight decay applied where TF1 applies none, on %s: at %s the port's update differs "
                "from TF1's by %s, %s. Exclude these variables from the port's weight decay as the TF1 optimizer "
                "does" % (_names(hint.keys), where, _decay(hint), fit))
    if hint.code == DECAY_MISSING:
        return ("named cause: weight decay left out on %s: at %s TF1's update subtracts %s, the port's nothing, %s. "
                "Decay these variables as the TF1 optimizer does" % (_names(hint.keys), where, _decay(hint), fit))
    if hint.code == DECAY_RATE:
        times = d.get("times_lr")
        if times:
            return ("named cause: the weight decay %s the learning rate. At %s TF1 decays %s by %.3g x lr x var a "
                    "step, the port by %.3g x lr x var (lr %.3g), %s: the port's decay is TF1's %s the learning rate "
                    "(torch.optim.AdamW, optax.adamw, Keras' AdamW and BERT's AdamWeightDecay multiply the decay by "
                    "it; tf.contrib.opt.AdamWOptimizer does not). Pass weight_decay %s lr"
                    % ("multiplied by" if times > 0 else "divided by", where, _names(hint.keys), hint.golden,
                       hint.port, d.get("lr", 0.0), fit, "times" if times > 0 else "divided by",
                       "/" if times > 0 else "x"))
        return ("named cause: another weight-decay rate on %s: at %s TF1 decays by %.3g, the port by %.3g (x lr "
                "where the golden has one learning rate), %s" % (_names(hint.keys), where, hint.golden, hint.port, fit))
    if hint.code == EPSILON:
        return ("named cause: the optimizer's epsilon. At %s the port's update of %s fits epsilon=%.2g, TF1's "
                "epsilon=%.2g (in m / (sqrt(v) + epsilon), Adam's moments verified from the golden's gradient), %s. "
                "Pass epsilon=%.2g" % (where, _names(hint.keys), hint.port, hint.golden, fit, hint.golden))
    if hint.code == EPSILON_HAT:
        t = int(d.get("t", 0))
        return ("named cause: Adam's epsilon added after the bias correction. At %s the port's update of %s is TF1's "
                "with epsilon=%.2g added to sqrt(v_hat) (PyTorch's and optax's Adam), where TF1 adds it to sqrt(v) and "
                "folds the correction into the step size (there epsilon acts as %.2g x sqrt(1 - beta_2^t) = %.2g at "
                "t=%d), %s. Compute the update as TF1 does (lr_t = lr sqrt(1 - beta_2^t) / (1 - beta_1^t); "
                "m / (sqrt(v) + epsilon)), or accept the difference with a tolerance"
                % (where, _names(hint.keys), hint.port, hint.port,
                   hint.port * math.sqrt(1 - float(d.get("beta_2", 0.999)) ** t), t, fit))
    if hint.code == BESSEL:
        n, port_corrects = int(d.get("n", 0)), hint.port > hint.golden
        return ("named cause: the running variance's Bessel correction. At %s the port moves %s toward the batch's "
                "variance times %s, %s (n %s %d values per feature, the average's rate %.3g). %s"
                % (where, _names(hint.keys), "n / (n - 1)" if port_corrects else "(n - 1) / n", fit,
                   "=" if n <= BESSEL_N_EXACT else "about", n,
                   d.get("rate", float("nan")),
                   "The port keeps the unbiased variance (PyTorch's BatchNorm does), TF1 the biased one (Keras' "
                   "batch norm of 2-D inputs, tf.nn.moments): update the average with the biased variance" if
                   port_corrects else "TF1 keeps the unbiased variance (its fused batch norm does), the port the "
                   "biased one: update the average with the variance times n / (n - 1)"))
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
    if hint.code == LR_FACTOR and d.get("nesterov_mu"):
        mu = d["nesterov_mu"]
        return ("named cause: the learning rate, or Nesterov's momentum. At %s the port's update of %s is %.4g x "
                "TF1's, %s; TF1's momentum accumulators start at this step, where Nesterov's momentum (mu %g) moves "
                "1 + mu = %.4g times as far as the plain momentum TF1 applies: check nesterov= (use_nesterov=) and "
                "the rate; a later step, started from the golden's state (forcing=\"state\"), tells them apart"
                % (where, _names(hint.keys), hint.port, fit, mu, 1 + mu))
    if hint.code == LR_FACTOR:
        return ("named cause: the learning rate. At %s the port's update of %s is %.4g x TF1's, %s: check the rate "
                "and its schedule (tracekit compares the rate where the port's step returns it)"
                % (where, _names(hint.keys), hint.port, fit))
    if hint.code == AVERAGE_RATE:
        return ("named cause: the rate of a moving average. At %s the port moves %s %.4g x as far as TF1, %s. No "
                "gradient moves these variables, so this is not a learning rate: a moving average's (1 - momentum) "
                "differs by that factor (TF1's momentum 0.9 against 0.99 gives 0.1; tf.layers and Keras default "
                "to 0.99, slim to 0.999; PyTorch's momentum= is TF's 1 - momentum). Give the port's layer TF1's momentum"
                % (where, _names(hint.keys), hint.port, fit))
    if hint.code == SIGN:
        return ("named cause: the update's sign. At %s the port moves %s opposite to TF1, %s: a gradient or a loss "
                "with its sign flipped (ascent where TF1 descends)" % (where, _names(hint.keys), fit))
    if hint.code == GRAD_SCALE:
        batch, norm, of = d.get("batch"), d.get("clip_norm"), int(d.get("of") or 0)
        why = (": a factor of the batch size (%d), the loss summed where TF1 averages it or the reverse" % batch
               if batch else ": the loss scaled, or the gradients clipped by global norm (one side's global norm "
               "is %.3g, a round number)" % norm if norm else
               ": on %d of the golden's %d gradients only, so not the loss's scale, which every gradient shares: a "
               "term the port counts %.4g times for them (a variable it holds as tensors that all train and add up, "
               "as an LSTM's two biases; a weight used twice)" % (len(hint.keys), of, hint.port)
               if 0 < len(hint.keys) < of else ": the loss scaled, or the gradients clipped otherwise")
        return ("named cause: the gradients of %s are %.4g x TF1's at %s, %s%s" % (_names(hint.keys), hint.port, where,
                                                                                fit, why))
    if hint.code == L2_IN_LOSS:
        return ("named cause: an L2 term in the loss. At %s the port's gradients of %s differ from TF1's by %.3g x "
                "var (TF1's by %.3g x var), %s: the port %s an L2 penalty (or decays through its loss where TF1 "
                "decays in the update)" % (where, _names(hint.keys), hint.port, hint.golden, fit,
                                           "adds" if abs(hint.port) > abs(hint.golden) else "leaves out"))
    text = _layer(hint, where, fit)
    if text is not None:
        return text
    text = _layout_and_optimizer(hint, where, fit)
    if text is not None:
        return text
    if hint.code == LOSS_TAP:
        return ("named cause: one part of the loss. At %s, %s is TF1's plus %.4g x the tap %r, the same weight at "
                "each of the %d step(s) from the golden's state, %s: the port %s that part (a coefficient or a sign: "
                "TF1's own weight of it is not recorded; record with --loss-parts to have it named as a factor)"
                % (where, hint.keys[0], hint.port, d.get("tap"), int(d.get("steps", 1)), fit,
                   "weighs more" if hint.port > 0 else "weighs less"))
    if hint.code == LOSS_TERM:
        factor = d.get("factor", 1.0)
        what = {-1.0: "its sign flipped", 0.0: "left out"}.get(factor, "%g x TF1's" % factor)
        together = " (with the other part named: the two together explain it; neither does alone)" if d.get("with") else ""
        return ("named cause: one part of the loss. At %s, %s is TF1's plus (%g - 1) x its term %d of %d (%s, times %g "
                "in TF1's loss)%s: that term is %s in the port, a coefficient of %g where TF1's is %g. It holds at %d "
                "step(s) from the golden's state, %s" % (
                    where, hint.keys[0], factor, int(d.get("term", 0)) + 1, int(d.get("terms", 0)), d.get("tensor"),
                    hint.golden, together, what, hint.port, hint.golden, int(d.get("steps", 1)), fit))
    return "named cause: %s at %s on %s, %s" % (hint.code, where, _names(hint.keys), fit)


# What to change, for the activation TF1 used (a port's usual spelling of it in TF 2).
SPELLED = {"gelu_tanh": "GELU's tanh approximation (tf.nn.gelu(x, approximate=True); Keras' gelu takes "
                        "approximate=True too)",
           "gelu_erf": "the exact GELU (tf.nn.gelu(x, approximate=False), the Keras default)",
           "silu": "SiLU / swish (tf.nn.silu)", "elu": "ELU (tf.nn.elu)", "selu": "SELU (tf.nn.selu)",
           "softplus": "softplus (tf.nn.softplus)", "sigmoid": "the sigmoid", "tanh": "tanh"}


def _layer(hint: Fingerprint, where: str, fit: str) -> Optional[str]:
    """The text of a layer's output changed by its activation or its normalization."""
    d = hint.detail
    tap = split_key(hint.keys[0])[1]
    if hint.code == ACTIVATION:
        golden, port = str(d.get("golden")), str(d.get("port"))
        wanted = SPELLED.get(golden) or ("%s (tf.nn.leaky_relu(x, alpha=%s); Keras' LeakyReLU defaults to 0.3)"
                                         % (golden, golden[len("leaky_relu("):-1]) if golden.startswith("leaky")
                                         else golden)
        return ("named cause: the activation of the layer tapped as %s. At %s its output is %s of the same "
                "pre-activations whose %s TF1 computed (TF1's values inverted through %s, on %d elements), %s. "
                "Use %s" % (tap, where, port, golden, golden, int(d.get("elements", 0)), fit,
                                                    wanted))
    if hint.code == NORM_EPSILON:
        larger = d.get("larger") == "port"
        return ("named cause: a normalization's epsilon, in the layer tapped as %s. At %s each row of its output is "
                "TF1's scaled about the layer's offset, by %.6g to %.6g (rows of small variance most), as %s "
                "epsilon in sqrt(variance + epsilon) scales it, %s. Give the port's normalization TF1's epsilon "
                "(Keras' LayerNormalization defaults to 1e-3; TF1 code often has 1e-12, 1e-6 or 1e-5)"
                % (tap, where, d.get("least", float("nan")), d.get("most", float("nan")),
                   "a larger" if larger else "a smaller", fit))
    return None


def _clip(threshold: float) -> str:
    return "does not clip" if math.isinf(threshold) else "clips at %.4g" % threshold


def _layout_and_optimizer(hint: Fingerprint, where: str, fit: str) -> Optional[str]:
    """The text of the forms no change of a usual parameter gives: clipping, Momentum's
    conventions, Adam's epsilon's place, a kernel's layout."""
    d = hint.detail
    if hint.code == CLIP_VALUE:
        unclipped = math.isinf(hint.golden)  # TF1's
        return ("named cause: gradient clipping by value. At %s the gradients of %s are %s clipped to [-c, c]: TF1 "
                "%s, the port %s (a side's threshold is its largest |element|, where two or more sit), %s. %s" % (
                    where, _names(hint.keys), "TF1's" if unclipped else "the port's, as TF1's are,",
                    _clip(hint.golden), _clip(hint.port), fit,
                    "Remove the port's clip (clipvalue=, tf.clip_by_value) or match TF1's" if unclipped else
                    "Clip as TF1 does (tf.clip_by_value on each gradient, or the optimizer's clipvalue=)"))
    if hint.code == CLIP_EACH_NORM:
        clips = math.isinf(hint.golden)
        return ("named cause: gradient clipping by each gradient's own norm. At %s the gradients of %s are each "
                "scaled by a factor of its own, to a norm of %.3g on %s's side, where %s does not clip them, %s. %s"
                % (where, _names(hint.keys), hint.port if clips else hint.golden, "the port" if clips else "TF1",
                   "TF1" if clips else "the port", fit,
                   "The port clips each gradient alone (tf.clip_by_norm, Keras' clipnorm=): clip as TF1 does, or not"
                   if clips else "TF1 clips each gradient alone (tf.clip_by_norm): clip each to that norm "
                   "(tf.clip_by_norm, Keras' clipnorm=)"))
    if hint.code == CLIP_NORM:
        clips = math.isinf(hint.golden)
        return ("named cause: gradient clipping by global norm. At %s the gradients of %s are all %.4g x TF1's, "
                "the global norm TF1's %.4g, the port's %.4g: %s clips to clip_norm=%.3g and %s does not, %s. %s"
                % (where, _names(hint.keys), d.get("factor", float("nan")), d.get("golden_norm", float("nan")),
                   d.get("port_norm", float("nan")), "the port" if clips else "TF1",
                   hint.port if clips else hint.golden, "TF1" if clips else "the port", fit,
                   "Clip as TF1 does (tf.clip_by_global_norm over all the gradients together, or the optimizer's "
                   "global_clipnorm=; clipnorm= clips each gradient alone)" if not clips else
                   "Remove the port's clip (global_clipnorm=, tf.clip_by_global_norm) or match TF1's"))
    if hint.code == NESTEROV:
        added = hint.port == 1.0
        return ("named cause: Nesterov momentum %s. At %s the port's update of %s is %s (momentum %.3g, verified "
                "from TF1's accumulator: accum' = momentum x accum + g), TF1's is %s, %s. %s" % (
                    "added" if added else "left out", where, _names(hint.keys),
                    "Nesterov's, var -= lr (g + momentum x accum')" if added else "plain momentum's, var -= lr accum'",
                    d.get("mu", float("nan")), "plain momentum's" if added else "Nesterov's", fit,
                    "Pass nesterov=%s as TF1's MomentumOptimizer has use_nesterov=%s" % (not added, not added)))
    if hint.code == MOMENTUM:
        return ("named cause: the momentum factor. At %s the port's update of %s fits momentum %.3g, TF1's %.3g "
                "(verified from TF1's accumulator: accum' = momentum x accum + g), %s. Pass momentum=%.3g"
                % (where, _names(hint.keys), hint.port, hint.golden, fit, hint.golden))
    if hint.code == EPSILON_INSIDE:
        port_inside = d.get("inside") == "port"
        forms = ("m / sqrt(v + epsilon)", "m / (sqrt(v) + epsilon)")
        return ("named cause: where the optimizer's epsilon is. At %s the port's update of %s is %s with "
                "epsilon=%.2g, TF1's %s with epsilon=%.2g (Adam's moments verified from the golden's gradient), %s. "
                "Put epsilon %s the square root, as TF1's update does" % (
                    where, _names(hint.keys), forms[0 if port_inside else 1], hint.port, forms[1 if port_inside else 0],
                    hint.golden, fit, "outside" if port_inside else "inside"))
    if hint.code == ADAM_L2:
        dropped = not d.get("decoupled_kept", 1.0)  # TF1 decays apart from the gradient, the port does not
        return ("named cause: an L2 term added to the gradient inside the optimizer. At %s the port's update of %s "
                "is Adam's on g + %.3g x var (torch.optim.Adam's weight_decay=, optax.add_decayed_weights before "
                "scale_by_adam), TF1's on g%s (Adam's moments verified from the golden's gradient; the gradient "
                "the port records is taken before the optimizer adds the term)%s, %s. %s" % (
                    where, _names(hint.keys), hint.port, ", its weights decayed apart from it" if dropped else "",
                    "" if not d.get("after_correction") else ", the port's epsilon added after the bias correction",
                    fit, "Decay the weights apart from the gradient, as TF1 does (decoupled: AdamW's form)" if dropped
                    else "Pass no weight_decay= to Adam: TF1's Adam has no such term (an L2 term TF1 has is in its "
                    "loss, and in the gradient it records)"))
    what = "gradient" if hint.keys and split_key(hint.keys[0])[0] == "grad" else "update"
    if hint.code == TRANSPOSED:
        return ("named cause: a kernel transposed. At %s the port's %s of %s is TF1's transposed (its last two "
                "axes swapped), %s: a square kernel loaded or used as its transpose (Dense's [in, out] against "
                "[out, in], matmul's transpose_b)" % (where, what, _names(hint.keys), fit))
    if hint.code == PERMUTED:
        return ("named cause: a kernel's blocks in another order. At %s the last axis of %s holds %d blocks: the "
                "port's %s is TF1's with its blocks in the order %s (the port's block j is TF1's block order[j]), %s. "
                "Gates laid out otherwise (TF1's LSTMCell orders its four i, j, f, o, Keras' LSTM i, f, c, o; GRUs "
                "differ in their three): reorder the blocks where the weights are converted" % (
                    where, _names(hint.keys), int(hint.port), what, d.get("order", "?"), fit))
    return None
