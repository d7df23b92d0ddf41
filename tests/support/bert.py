"""What the PyTorch and JAX ports of google-research/bert's classifier (tests/torch/test_bert_torch.py,
tests/jax/test_bert_jax.py) are both held to: their slips named, localize's finding and its
reproduction's script."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from . import ROOT

# (slip, the causes named, a line of the report): the wrong ports both frameworks build
SLIPS = [
    # the framework's AdamW: bias-corrected where BERT's is not, its epsilon after the correction
    ("adamw", ["epsilon", "bias-correction"], "Adam's bias correction. At step 0 the port's update of"),
    # the decay on every weight: LayerNorm weights decayed, which BERT's exclusion list leaves alone
    ("decay-all", ["weight-decay-added"], "weight decay applied where TF1 applies none, on 5 variables"),
]


def assert_slip_named(result, slip, codes, text):
    assert not result.ok and result.first_divergence.step == 0, result.report()
    assert [f.code for f in result.fingerprints] == codes, result.report()
    assert text in result.report()
    if slip == "decay-all":
        found, = result.fingerprints
        assert all("LayerNorm" in key for key in found.keys), found.keys
        assert (found.golden, found.port) == pytest.approx((0.0, 0.01))


def assert_decay_localized(found, package, holder):
    """localize on the decay-all port: step 0, the first LayerNorm scale, named, the float64 arbiter
    calling it the port's; the reproduction loads the step's whole state and fails for it, and its
    script (checking through `package`, the port passed as `holder`=) exits 1 saying why."""
    from tracekit.comparison.arbiter import PORT

    assert (found.step, found.key) == (0, "var/bert/embeddings/LayerNorm/gamma:0"), found.report()
    assert [f.code for f in found.state.fingerprints] == ["weight-decay-added"]
    assert [a.verdict for a in found.state.arbitration.steps] == [PORT]  # the float64 port disagrees too
    assert found.reproduces, found.reproduced
    assert "loaded and read back 41 variables, 82 slots and 1 counter" in found.reproduced
    script = open(found.script).read()
    assert "%s.check(" % package in script and "%s=made[0]" % holder in script
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run([sys.executable, found.script], cwd=ROOT, capture_output=True, text=True,
                          env=dict(env, PYTHONPATH=ROOT))
    assert done.returncode == 1 and "weight decay applied where TF1 applies none" in done.stdout, done.stderr[-2000:]
