"""A JAX port of a public TF1 program: google-research/bert's classifier fine-tuned by its own
AdamWeightDecayOptimizer, recorded on TF 1.15 from the corpus (dropout on, gradients clipped by
their global norm), replayed into tools/ports/jax/bert_classifier.py: flax modules named as
Hugging Face's FlaxBertModel, BERT's optimizer as an optax chain (global-norm clipping, Adam
without bias correction, weight decay under a mask, the rate's schedule under inject_hyperparams),
the classifier's kernel paired by a transposing rule. It matches at the default tolerance,
taught the golden's state or not, its gradients compared with the golden's unclipped ones (or its
clipped ones, where the step clips before tx), as their global norm tells; optax.adamw in the chain,
and the decay left unmasked, are caught at step 0 with the cause named."""

from __future__ import annotations

import pytest

import tracekit
from tools.ports.jax import bert_classifier
from tracekit.keys import UNCLIPPED

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
    # the golden clipped from step 1 (its global norm 1.05): tx is handed the gradients before the
    # chain's clip, told by their global norm there and said; compared with the golden's unclipped
    # ones at every step, with its clipped ones (the same) until then
    unclipped = [n for n in grads if n.endswith(UNCLIPPED)]
    assert len(unclipped) == 40 and all(result.tensor("grad", n).steps == 4 for n in unclipped)
    assert all(result.tensor("grad", n).steps == 1 for n in grads if not n.endswith(UNCLIPPED) and n + UNCLIPPED in
               grads)
    assert "at step 1, where TF1's clip acted first: the golden's before clipping" in result.report()


def test_a_step_that_clips_before_tx_is_compared_with_the_clipped_gradients(tj, corpus_bert):
    state, step, own = bert_classifier.make(clip_in_step=True)
    result = tj.check(corpus_bert, step, state=state, **own)
    assert result.ok, result.report()
    with tracekit.open(corpus_bert) as golden:
        clipped = [n for n in golden.names("grad") if not n.endswith(UNCLIPPED)]
    assert len(clipped) == 41 and all(result.tensor("grad", n).steps == 4 for n in clipped)
    assert "at step 1, where TF1's clip acted first: the golden's after clipping" in result.report()


@pytest.mark.parametrize("forcing", ["none", "state"])
@pytest.mark.parametrize("slip, codes, text", SLIPS)
def test_a_slip_is_caught_at_its_step_and_named(tj, corpus_bert, slip, codes, text, forcing):
    assert_slip_named(_check(tj, corpus_bert, slip, forcing), slip, codes, text)


def test_localize_names_the_step_the_cause_and_writes_a_reproduction_that_fails_for_it(tj, corpus_bert, tmp_path):
    found = tj.localize(corpus_bert, bert_classifier.make_decay_all, out=str(tmp_path))
    assert_decay_localized(found, "tracekit.jax", "state")
