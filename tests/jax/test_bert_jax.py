"""A JAX port of a public TF1 program: google-research/bert's classifier fine-tuned by its own
AdamWeightDecayOptimizer, recorded on TF 1.15 from the corpus (dropout on, gradients clipped by
their global norm), replayed into tools/ports/jax/bert_classifier.py: flax modules named as
Hugging Face's FlaxBertModel, BERT's optimizer as an optax chain (global-norm clipping, Adam
without bias correction, weight decay under a mask, the rate's schedule under inject_hyperparams),
the classifier's kernel paired by a transposing rule. It matches at the default tolerance,
taught the golden's state or not; optax.adamw in the chain, and the decay left unmasked, are
caught at step 0 with the cause named."""

from __future__ import annotations

import pytest

import tracekit
from tools.ports.jax import bert_classifier

from ..support.bert import SLIPS, assert_decay_localized, assert_slip_named


def _check(tj, golden, slip=None, forcing="none"):
    state, step, own = bert_classifier.make(slip=slip)
    return tj.check(golden, step, state=state, forcing=forcing, **own)


@pytest.mark.parametrize("forcing", ["none", "state"])
def test_the_port_matches_every_tensor_at_the_default_tolerance(tj, corpus_bert, forcing):
    result = _check(tj, corpus_bert, forcing=forcing)
    assert result.ok and result.steps == 4 and not result.noise, result.report()
    compared = {t.key for t in result.tensors}
    with tracekit.open(corpus_bert) as golden:
        trained = [n for n in golden.names("var") if n != "global_step:0"]
        draws = golden.names("random")
        slots = golden.names("slot")
        grads = golden.names("grad")
    assert len(trained) == 41 and len(draws) == 8 and len(slots) == 82
    # every weight, BERT's m and v of each (the classifier's through its conversion), the step
    # count, the rate read where inject_hyperparams keeps it, the loss and each dropout draw
    wanted = ({"var/" + n for n in trained} | {"slot/" + n for n in slots} | {"random/" + n for n in draws}
              | {"var/global_step:0", "lr/learning_rate", "loss/loss"})
    assert wanted <= compared, sorted(wanted - compared)
    # the golden clipped: what tx is handed is before the chain's clipping, so no gradient is
    # compared, and the result says so for each
    assert not {k for k in compared if k.startswith("grad/")}
    assert {"grad/" + n for n in grads} <= set(result.not_compared)
    assert "before any clipping inside its optax chain" in result.report()


@pytest.mark.parametrize("forcing", ["none", "state"])
@pytest.mark.parametrize("slip, codes, text", SLIPS)
def test_a_slip_is_caught_at_its_step_and_named(tj, corpus_bert, slip, codes, text, forcing):
    assert_slip_named(_check(tj, corpus_bert, slip, forcing), slip, codes, text)


def test_localize_names_the_step_the_cause_and_writes_a_reproduction_that_fails_for_it(tj, corpus_bert, tmp_path):
    found = tj.localize(corpus_bert, bert_classifier.make_decay_all, out=str(tmp_path))
    assert_decay_localized(found, "tracekit.jax", "state")
