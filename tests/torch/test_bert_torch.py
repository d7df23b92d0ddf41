"""A PyTorch port of a public TF1 program: google-research/bert's classifier fine-tuned by its own
AdamWeightDecayOptimizer, recorded on TF 1.15 from the corpus (dropout on, gradients clipped by
their global norm), replayed into tools/ports/torch/bert_classifier.py: modules named as Hugging
Face's, BERT's optimizer as a torch.optim.Optimizer subclass with two parameter groups, the
classifier's weight paired by a transposing rule. It matches at the default tolerance, taught the
golden's state or not; torch's AdamW in its place, and one parameter group that decays every
weight, are caught at step 0 with the cause named."""

from __future__ import annotations

import pytest

import tracekit
from tools.ports.torch import bert_classifier
from tracekit.keys import UNCLIPPED

from ..support.bert import SLIPS, assert_decay_localized, assert_slip_named


def _check(tt, golden, slip=None, forcing="none"):
    model, step, own = bert_classifier.make(slip=slip)
    return tt.check(golden, step, model=model, forcing=forcing, **own)


@pytest.mark.parametrize("forcing", ["none", "state"])
def test_the_port_matches_every_tensor_at_the_default_tolerance(tt, corpus_bert, forcing):
    result = _check(tt, corpus_bert, forcing=forcing)
    assert result.ok and result.steps == 4 and not result.noise, result.report()
    compared = {t.key for t in result.tensors}
    with tracekit.open(corpus_bert) as golden:
        trained = [n for n in golden.names("var") if n != "global_step:0"]
        draws = golden.names("random")
        unclipped = [n for n in golden.names("grad") if n.endswith(UNCLIPPED)]
        slots = golden.names("slot")
    assert len(trained) == 41 and len(draws) == 8 and len(slots) == 82
    # every weight, its gradient before and after clip_grad_norm_ (the classifier's through its
    # conversion), BERT's m and v of each, the step count, the rate, the loss and each dropout draw
    wanted = ({"var/" + n for n in trained} | {"grad/" + n for n in trained} | {"grad/" + n for n in unclipped}
              | {"slot/" + n for n in slots} | {"random/" + n for n in draws}
              | {"var/global_step:0", "lr/learning_rate", "loss/loss"})
    assert wanted <= compared, sorted(wanted - compared)
    assert "grad/output_weights:0" + UNCLIPPED in compared


@pytest.mark.parametrize("forcing", ["none", "state"])
@pytest.mark.parametrize("slip, codes, text", SLIPS)
def test_a_slip_is_caught_at_its_step_and_named(tt, corpus_bert, slip, codes, text, forcing):
    assert_slip_named(_check(tt, corpus_bert, slip, forcing), slip, codes, text)


def test_localize_names_the_step_the_cause_and_writes_a_reproduction_that_fails_for_it(tt, corpus_bert, tmp_path):
    found = tt.localize(corpus_bert, bert_classifier.make_decay_all, out=str(tmp_path))
    assert_decay_localized(found, "tracekit.torch", "model")


def test_attention_through_torchs_fused_kernel_takes_the_goldens_dropout(tt, corpus_bert):
    # F.scaled_dot_product_attention(..., dropout_p=0.1): computed step by step for the replay, its
    # dropout fed the golden's draw; left to torch's own draws it departs at the loss
    model, step, own = bert_classifier.make(sdpa=True)
    result = tt.check(corpus_bert, step, model=model, **own)
    assert result.ok and not result.noise, result.report()
    draws = [t for t in result.tensors if t.kind == "random" and "attention/self/dropout" in t.name]
    assert len(draws) == 2 and all(t.steps == 4 for t in draws)
    model, step, own = bert_classifier.make(sdpa=True)
    off = tt.check(corpus_bert, step, model=model, random="none", **own)
    assert (off.first_divergence.step, off.first_divergence.key) == (0, "loss/loss"), off.report()
