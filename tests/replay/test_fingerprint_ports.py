"""Slip fingerprints on a real program: google-research/bert fine-tuned by its own
AdamWeightDecayOptimizer, recorded in TF 1.15 (the corpus, docs/CORPUS.md), and its hand-written
TF2 port with a slip seeded (tools/corpus/ports/bert_classifier.py). The teacher-forced replay must
fail at the slip's step and name the slip with its parameter; the correct port gets no name."""

from __future__ import annotations

import json

import pytest

from tools.corpus import by_name, record, replay

from .test_corpus import _interpreter


@pytest.fixture(scope="module")
def bert_golden(legacy_python, tmp_path_factory):
    program = by_name("bert_classifier")
    where = tmp_path_factory.mktemp("bert")
    golden = str(where / "bert.h5")
    record(program, _interpreter(legacy_python, program), golden, str(where / "work"))
    return program, golden


@pytest.mark.parametrize("slip, code, golden, port, text", [
    ("epsilon", "epsilon", 1e-6, 1e-8, "fits epsilon=1e-08, TF1's epsilon=1e-06"),
    ("bias-correction", "bias-correction", 0.0, 1.0, "0.3162 x TF1's, the correction sqrt(1 - beta_2^t) / "
                                                     "(1 - beta_1^t) at t=1 (betas 0.9, 0.999"),
])
def test_a_seeded_slip_is_named(bert_golden, slip, code, golden, port, text):
    program, path = bert_golden
    result = replay(program, path, slip=slip)
    assert not result.ok and result.first_divergence.step == 0
    assert [f.code for f in result.fingerprints] == [code], result.report()
    found, = result.fingerprints
    assert result.first_divergence.key in found.keys and len(found.keys) >= 20  # the kernels, embeddings, norms
    assert found.golden == pytest.approx(golden, rel=0.05) and found.port == pytest.approx(port, rel=0.05)
    assert text in result.report()
    assert json.loads(json.dumps(result.to_dict(by_step=False)))["fingerprints"][0]["code"] == code


def test_the_correct_port_gets_no_name(bert_golden):
    program, path = bert_golden
    result = replay(program, path)
    assert result.ok and result.fingerprints == []
