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
@pytest.mark.parametrize("slip, codes, text", [
    # torch.optim.AdamW: bias-corrected where BERT's is not, its epsilon after the correction
    ("adamw", ["epsilon", "bias-correction"], "Adam's bias correction. At step 0 the port's update of"),
    # one parameter group: LayerNorm weights decayed, which BERT's exclusion list leaves alone
    ("decay-all", ["weight-decay-added"], "weight decay applied where TF1 applies none, on 5 variables"),
])
def test_a_slip_is_caught_at_its_step_and_named(tt, corpus_bert, slip, codes, text, forcing):
    result = _check(tt, corpus_bert, slip, forcing)
    assert not result.ok and result.first_divergence.step == 0, result.report()
    assert [f.code for f in result.fingerprints] == codes, result.report()
    assert text in result.report()
    if slip == "decay-all":
        found, = result.fingerprints
        assert all("LayerNorm" in key for key in found.keys), found.keys
        assert (found.golden, found.port) == pytest.approx((0.0, 0.01))


def test_localize_names_the_step_the_cause_and_writes_a_reproduction_that_fails_for_it(tt, corpus_bert, tmp_path):
    import subprocess
    import sys

    from tracekit.comparison.arbiter import PORT
    from ..support import ROOT

    found = tt.localize(corpus_bert, bert_classifier.make_decay_all, out=str(tmp_path))
    assert (found.step, found.key) == (0, "var/bert/embeddings/LayerNorm/gamma:0"), found.report()
    assert [f.code for f in found.state.fingerprints] == ["weight-decay-added"]
    assert [a.verdict for a in found.state.arbitration.steps] == [PORT]  # the float64 port disagrees too
    assert found.reproduces, found.reproduced
    assert "loaded and read back 41 variables, 82 slots and 1 counter" in found.reproduced
    # the script replays the step with tracekit.torch.check and fails while the slip is there
    assert "tracekit.torch.check(" in open(found.script).read()
    done = subprocess.run([sys.executable, found.script], cwd=ROOT, capture_output=True, text=True,
                          env=dict(__import__("os").environ, PYTHONPATH=ROOT))
    assert done.returncode == 1 and "weight decay applied where TF1 applies none" in done.stdout, done.stderr[-2000:]
