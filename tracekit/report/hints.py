"""Text of the hints a first divergence gets: the TF1/Keras conventions it fits (with the
value fitted) and the migration slips it looks like (with their evidence), each with what to do."""

from __future__ import annotations

from typing import Any

from ..comparison.dropout import DROPOUT_RATE
from ..comparison.conventions import (ADAM_EPSILON, MOMENTUM, RMSPROP_EPSILON, SPARSE_ROWS, SPARSE_UNNAMED,
                                      ConventionHint)
from ..comparison.slips import (ACCUMULATION, BN_MOMENTUM, LOSS_AVERAGED, LOSS_SUMMED, LR_RACE, LR_SHIFTED,
                                MICRO_LOSSES, OPTIMIZER_SETTING, RANDOM_DRAWS, READ_RACE, REGULARIZATION_DOUBLED,
                                REGULARIZATION_MISSING, SKIPPED_STEP, SLOT_INITIAL, SlipHint)
from ..keys import step_label
from ..store.raced import ABSORBED, FIX
from .text import num


def convention(hint: ConventionHint) -> str:
    if hint.code == MOMENTUM and hint.lr_change is not None:
        step, before, after = hint.lr_change
        return ("possible cause: the momentum convention. TF1's MomentumOptimizer accumulates gradients "
                "(accum = m*accum + g; var -= lr*accum), Keras SGD(momentum=m) accumulates steps (v = m*v - lr*g; "
                "var += v); they agree only while the learning rate is constant, and the golden's changes at %s "
                "(%s -> %s). Keep TF1's rule: tf.compat.v1.train.MomentumOptimizer runs in TF2 and tracekit replays it "
                "(pass it global_step=), or keep the learning rate constant where it must match" % (step_label(step), num(before), num(after)))
    if hint.code == ADAM_EPSILON:
        fit = "" if hint.fitted_epsilon is None else (
            "; element by element the two updates differ as one epsilon would make them (an effect that grows as "
            "sqrt(v) shrinks): they fit epsilon=%.2g in the replay, taking TF1's 1e-8 for the golden"
            % hint.fitted_epsilon)
        return ("possible cause: Adam's epsilon. At %s the gradients, the learning rate and Adam's m and v all "
                "agree, but %s does not: only the update differs%s. TF1's AdamOptimizer uses epsilon=1e-8, "
                "Keras Adam 1e-7: pass epsilon=1e-8 (and check beta_1, beta_2, amsgrad)"
                % (step_label(hint.step), hint.key, fit))
    if hint.code == RMSPROP_EPSILON:
        return ("possible cause: RMSprop's epsilon. At %s the gradients, the learning rate and the RMSprop slots all "
                "agree, but %s does not: only the update differs. TF1's RMSPropOptimizer uses epsilon=1e-10 (inside "
                "the square root), Keras RMSprop 1e-7: pass epsilon=1e-10" % (step_label(hint.step), hint.key))
    if hint.code == SPARSE_ROWS and hint.rows is not None:
        differing, _, repeated = hint.rows
        return ("possible cause: a sparse gradient's repeated rows. At %s the gradients and the learning rate agree, "
                "and %s differs only in rows whose index occurs more than once in the step's sparse gradient (%d "
                "rows differ; %d indices repeat). TF1's optimizers, like tf-keras', sum the rows of an index before "
                "the update; Keras 3's apply each row in turn (Adam's v gets the sum of their squares, not the "
                "square of their sum). Use tf-keras (TF_USE_LEGACY_KERAS=1 before TensorFlow is imported), or "
                "give the Keras 3 optimizer dense gradients (tf.convert_to_tensor(grad) for a tf.IndexedSlices)"
                % (step_label(hint.step), hint.key, differing, repeated))
    if hint.code == SPARSE_UNNAMED and hint.rows is not None:
        differing, _, unnamed = hint.rows
        return ("possible cause: a sparse gradient made dense. At %s the gradients and the learning rate agree, and "
                "%s differs only in rows that no index of the step's sparse gradient names (%d of those %d rows "
                "differ): TF1's sparse update leaves them, the port's optimizer updated them as with a zero gradient "
                "(both Kerases' Ftrl do). Use TF1's optimizer in the port (tf.compat.v1.train's runs in TF 2 and "
                "tracekit replays it), or one that updates only the rows a sparse gradient names"
                % (step_label(hint.step), hint.key, differing, unnamed))
    return "possible cause: %s at %s, %s" % (hint.code, step_label(hint.step), hint.key)


def _start_advice(update: Any) -> str:
    """How to start a slot as the TF1 optimizer whose update op is `update` did."""
    update = str(update or "")
    if "RMSProp" in update:
        return ("TF1's RMSPropOptimizer starts its rms slot at 1.0, Keras', PyTorch's and optax's RMSprop at 0: set "
                "it to 1.0 after optimizer.build(variables) (Keras), or before the first step (PyTorch: its state's "
                "square_avg), pass optax.rmsprop(initial_scale=1.0), or use tf.compat.v1.train.RMSPropOptimizer")
    if "Adagrad" in update or "Ftrl" in update:
        return ("Adagrad's and Ftrl's initial_accumulator_value; TF1 defaults to 0.1, Keras' Adagrad and optax's "
                "adagrad too, PyTorch's to 0")
    return "the TF1 optimizer's starting value of that slot"


def _full(x: float) -> str:
    return "%.7g" % x


def slip(hint: SlipHint) -> str:
    """A usual migration slip the first divergence fits, with its evidence and the fix."""
    e, at = hint.evidence, "%s, %s" % (step_label(hint.step), hint.key)
    if hint.code in (REGULARIZATION_MISSING, REGULARIZATION_DOUBLED):
        missing = hint.code == REGULARIZATION_MISSING
        return ("hint: the regularization loss is %s. At %s is %s in the golden, %s in the replay: %s by %s, the "
                "golden's regularization loss at that step (the gradients then differ by its gradient, lambda * w). "
                "%s" % ("left out" if missing else "added twice", at, _full(e["golden"]), _full(e["actual"]),
                        "lower" if missing else "higher", _full(e["regularization"]),
                        "Add the model's regularization losses to the loss (tf.add_n(model.losses))" if missing else
                        "Add it once: Keras' compile()/fit() already add model.losses"))
    if hint.code in (LOSS_SUMMED, LOSS_AVERAGED):
        summed = hint.code == LOSS_SUMMED
        return ("hint: the loss is %s over the batch where the golden %s it. At %s is %s in the golden, %s in the "
                "replay: a factor of the batch size, %d (the gradients scale with it). Use reduction=%s"
                % ("summed" if summed else "averaged", "averaged" if summed else "summed", at, _full(e["golden"]),
                   _full(e["actual"]), e["batch"], "'sum_over_batch_size'" if summed else "'sum'"))
    if hint.code == LR_SHIFTED:
        return ("hint: the learning-rate schedule is one step %s. At %s is %s, the golden's rate at %s (the golden's "
                "here: %s). Evaluate the schedule at the step TF1 did (its global_step before the update, as Keras' "
                "optimizer.iterations)" % ("ahead" if e["shift"] > 0 else "behind", at, _full(e["actual"]),
                                           step_label(hint.step + e["shift"]), _full(e["golden"])))
    if hint.code == LR_RACE:
        race = e["race"]
        return ("hint: a race in the TF1 training step, not necessarily the port. The TF1 run read %s for its learning "
                "rate (op %s) with no ordering against the counter's increment (op %s), so each recorded step holds "
                "the rate before or after the increment, as TF1's scheduler ran them (tracekit show lists the race). At "
                "%s the golden's rate is %s, the replay's %s. Make the TF1 step order the increment after the update "
                "(apply_gradients(..., global_step=...)) and record again, or compare with a tolerance rule for %s"
                % (race.get("counter"), race.get("read"), race.get("increment"), at,
                   *("?" if v is None else _full(v) for v in (e["golden"], e["actual"])), hint.key))
    if hint.code == READ_RACE:
        race, effect = e["race"], e.get("effect")
        said = ("Order the read before the update in the TF1 program (a control dependency) and record again, or "
                "compare %s with a tolerance rule" % hint.key)
        if effect is not None and effect > ABSORBED:  # measured when recorded: past any tolerance
            said = ("The race moved it by up to %.3g of its size in the TF1 run: no tolerance absorbs that; %s"
                    % (effect, FIX))
        elif effect is not None:
            said = ("The race moved it by at most %.2g of its size in the TF1 run: a tolerance rule on %s absorbs it, "
                    "or %s" % (effect, hint.key, FIX))
        return ("hint: a race in the TF1 training step, not necessarily the port. %s reads %s (op %s) with no "
                "ordering against its update (op %s) in the same run, so the golden holds the value as fetched, "
                "before or after the update as TF1's scheduler ran them (tracekit show lists the race). %s" % (
                    hint.key, race.get("variable"), race.get("read"), race.get("update"), said))
    if hint.code == BN_MOMENTUM:
        return ("hint: batch-norm momentum. At %s moved %.3g times as far as in the golden while the forward pass and "
                "the gradients agree: (1 - momentum) differs by that factor (a golden momentum of 0.9 against 0.99 "
                "gives 0.1). tf.layers.batch_normalization and Keras default to 0.99, slim to 0.999: give "
                "BatchNormalization the golden code's momentum" % (at, e["ratio"]))
    if hint.code == RANDOM_DRAWS:
        if e.get("random") == "none":
            return ("hint: the random draws differ (%s): the replay ran with random='none', so dropout and the other "
                    "random ops drew their own numbers. Replay with the random tape (random='tape', the default)" % at)
        return ("hint: the random draws differ (%s): the port's random op did not take the golden's draws. Check that "
                "dropout (or the random op) runs inside the replayed step, with the shape and order of the golden's "
                "(tracekit show lists its random draws)" % at)
    if hint.code == SLOT_INITIAL:
        golden = "%s everywhere" % _full(e["golden"]) if e.get("golden") is not None else "other values"
        return ("hint: the port's optimizer starts %s at %s where the TF1 optimizer started it at %s. The replay "
                "loaded the golden's state, but the port on its own would not train like TF1: give the optimizer "
                "TF1's initial value (%s)" % (hint.key, _full(e["actual"]), golden, _start_advice(e.get("update"))))
    if hint.code == ACCUMULATION:
        how = {"sum": "summed", "mean": "averaged"}.get(e.get("form") or "", "accumulated")
        return ("hint: gradient accumulation. TF1's %s applied once the gradients of its %d micro-batch runs, "
                "%s; the port's optimizer applied %d times in its step. Add up each micro-batch's gradients in the "
                "step and apply them once (divided by %d where TF1 averaged), or let the optimizer accumulate "
                "(Keras' gradient_accumulation_steps=%d)" % (step_label(hint.step), e["micro_batches"], how,
                                                           e["applies"], e["micro_batches"], e["micro_batches"]))
    if hint.code == SKIPPED_STEP:
        scale = e.get("loss_scale")
        said = ("hint: TF1 skipped %s: %d of its %d gradients are not finite (a loss-scale optimizer's overflow), so "
                "it applied no update there" % (step_label(hint.step), e["nonfinite"], e["gradients"]))
        if not e.get("port_applied"):
            return ("%s. The port's update agrees (it applied none either); its gradients are finite and cannot "
                    "agree with TF1's there: leave that step's gradients out of the comparison" % said)
        return ("%s, and the port applied its finite ones. A port without TF1's loss scale does not overflow where "
                "TF1's scaled gradients did: give it a loss-scale optimizer starting where TF1's scale stood%s, or "
                "leave that step's update out as TF1 did" % (said, "" if scale is None else
                                                                " (%s after the step)" % _full(scale)))
    if hint.code == MICRO_LOSSES:
        actual = e.get("actual")
        return ("hint: %s holds the loss of each of the TF1 step's %d micro-batch runs (their mean is %s%s); the port "
                "returned %s. Return each micro-batch's loss from the step, stacked in order: "
                "{\"loss\": tf.stack(losses)}" % (
                    hint.key, e["micro_batches"], _full(e["mean"]),
                    "" if actual is None else ", the port's value %s" % _full(actual),
                    "one value" if not e.get("shape") else "shape %s" % tuple(e["shape"])))
    if hint.code == OPTIMIZER_SETTING:
        return ("hint: the port's %s sets %s where the TF1 update of %s (%s) used %s: give the TF2 optimizer "
                "TF1's settings" % (e["optimizer"], ", ".join("%s=%s" % (own, _full(value)) for _, own, _, value
                                                               in e["differ"]),
                                     e["variable"], e["update"], ", ".join("%s=%s" % (arg, _full(value))
                                                                           for arg, _, value, _ in e["differ"])))
    if hint.code == DROPOUT_RATE:
        return ("hint: the dropout rate. The replay fed the port's dropout the golden's draws %s, and it dropped at "
                "rate %s (keeping %.1f%% of them at %s) where TF1 dropped at %s (keeping %.1f%%): the same numbers, "
                "other units kept. Give the port's dropout rate=%s (TF1's keep_prob k is rate 1 - k)"
                % (hint.key, _full(e["actual"]), 100 * e["kept_actual"], step_label(hint.step), _full(e["golden"]),
                   100 * e["kept_golden"], "%.6g" % e["golden"]))
    return "hint: %s at %s" % (hint.code, at)
