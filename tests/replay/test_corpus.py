"""The corpus (docs/CORPUS.md): public TF1 programs installed from the package registry, each
recorded zero-code for real in TF 1.15 and replayed through the TF2 port a team would write;
each must match at the default tolerance, with oneDNN's kernels on and off, and each golden
must pass its own checks (the loss is what was differentiated, the updates agree) and `verify
--audit`, held to the loss the program itself printed where it prints one. Programs marked slow
say why."""

from __future__ import annotations

import os
import sys

import pytest

import tracekit
from tracekit.keys import MICRO, UNCLIPPED
from tracekit.store import audit_trace
from tracekit.store.audit_result import NOT_AUDITABLE
from tools.corpus import PROGRAMS, by_name, record, replay, step_loss

from ..support import PLANT, run_python
from .test_optimizer_conventions import assert_keras_rmsprop_from_zero


def _param(program):
    marks = [pytest.mark.slow] if program.slow else []
    return pytest.param(program, id=program.name, marks=marks)


@pytest.mark.parametrize("program", [_param(p) for p in PROGRAMS])
def test_the_port_of_a_public_program_matches(legacy_python, tmp_path, program):
    golden = str(tmp_path / (program.name + ".h5"))
    recorded = record(program, _interpreter(legacy_python, program), golden, str(tmp_path / "work"))
    with tracekit.open(golden) as trace:
        # the golden checked itself: the loss it holds is what was differentiated, the updates agree
        assert [c["verdict"] for c in trace.meta["self_check"]] and \
            all(c["verdict"] == "verified" for c in trace.meta["self_check"]), trace.meta["self_check"]
        assert not [v for v in trace.meta["audit"]["variables"] if v["verdict"] == "disagrees"]
        audited = audit_trace(trace)  # `tracekit verify --audit`, from the golden alone
        assert audited.ok and audited.audited, audited
        # every update agrees, by its kernel's rule or by its re-execution when recorded: none unaudited
        assert not [v for v in audited.variables if v.verdict == NOT_AUDITABLE], audited.variables
        TRUTHS.get(program.name, lambda trace: None)(trace)
        if program.prints_loss:  # held to the program's own totals, computed without tracekit
            printed = recorded.losses()
            assert len(printed) == len(trace) > 0
            assert [step_loss(step) for step in trace] == pytest.approx(printed, rel=1e-6, abs=1e-6)
    if not program.ported:
        return
    result = replay(program, golden)
    assert result.ok and not result.missing, result.report()
    # and with oneDNN's kernels switched the other way than in this process (its round-off differs)
    other = "0" if os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") != "0" else "1"
    flipped = run_python(sys.executable, ["-m", "tools.corpus", program.name, "--golden", golden],
                         env={"TF_ENABLE_ONEDNN_OPTS": other}, check=False)
    assert flipped.returncode == 0 and "MATCH" in flipped.stdout, (other, flipped.stdout[-3000:])
    # nothing trained is left out: every variable a step trained, and its gradient, was compared
    with tracekit.open(golden) as trace:
        trained = {_variable(n) for n in trace.names("grad")}
    compared = {t.key for t in result.tensors}
    wanted = {"grad/" + n for n in trained} | {"var/" + n for n in trained}
    assert wanted <= compared, sorted(wanted - compared)


def test_bert_fine_tuning_has_every_gradient_and_slot(corpus_bert):
    # google-research/bert's own optimizer: hand-written updates read the embedding's gradient
    # (IndexedSlices from tf.gather) converted to a dense tensor after clip_by_global_norm
    with tracekit.open(corpus_bert) as trace:
        trainable = [n for n in trace.names("var") if n != "global_step:0"]
        assert len(trainable) == 41
        assert sorted(n for n in trace.names("grad") if not n.endswith(UNCLIPPED)) == sorted(trainable)
        slots = trace.meta["slots"]
        for var in trainable:
            roles = sorted(s["arg"] for s in slots.values() if s["var"] == var)
            assert roles == ["adam_m", "adam_v"], (var, roles)
        assert not [w for w in trace.meta["warnings"] if "gradient of" in w]  # no false warning
        check, = trace.meta["self_check"]
        assert check["verdict"] == "verified" and check["variables"] == 41


def test_a2c_on_keras_rmsprop_started_at_zero_is_caught_at_the_initial_state(legacy_python, tmp_path):
    # The A2C port as first written on Keras RMSprop(rho=0.99, epsilon=1e-5): accepted as a port of
    # TF1's RMSProp (whose momentum slot at momentum 0 does nothing), and its mean square's start of
    # 0 (TF1's is 1.0) named at the initial state; from the golden's state, every step matches.
    program = by_name("sb_a2c")
    golden = str(tmp_path / "a2c.h5")
    record(program, _interpreter(legacy_python, program), golden, str(tmp_path / "work"))
    assert_keras_rmsprop_from_zero(replay(program, golden, tf1_start=False), 12)


def test_bert_judged_from_digests_matches_by_the_envelope(legacy_python, tmp_path):
    # google-research/bert recorded with its state whole only every 100 steps (digests between),
    # checked through the corpus port's factory: judged by the envelope, the correct port matches.
    import tracekit.tf2
    from tools.corpus.ports import bert_classifier

    program = by_name("bert_classifier")
    golden = str(tmp_path / "bert.h5")
    args = ("--steps", "8", "--train-steps", "1000000000", "--warmup", "0")
    record(program, _interpreter(legacy_python, program), golden, str(tmp_path / "work"), options=("--every", "100"),
           args=args)

    def port():
        variables, step, options = bert_classifier.port(tracekit.tf2.tf)
        return None, step, dict(options, variables=variables)
    result = tracekit.tf2.check(golden, make_port=port)
    assert result.ok and result.judged == "envelope", result.report()
    assert result.tensor("var", "bert/embeddings/word_embeddings:0").digest_steps == 7  # steps 1-7


def test_a_planted_wrong_step_of_bert_s_hand_written_update_fails_the_audit(legacy_python, tmp_path, monkeypatch):
    # BERT's AdamWeightDecay (assign ops: no kernel rule): a golden whose step 1 moved the pooler's
    # kernel 1.5 times as far as its update did is caught by re-executing the update, naming both
    monkeypatch.setenv("PYTHONPATH", PLANT)
    monkeypatch.setenv("TRACEKIT_PLANT", "bert/pooler/dense/kernel:0@1")
    program = by_name("bert_classifier")
    golden = str(tmp_path / "planted.h5")
    record(program, _interpreter(legacy_python, program), golden, str(tmp_path / "work"),
           args=("--steps", "3", "--train-steps", "1000000000", "--warmup", "0"))
    with tracekit.open(golden) as trace:
        audited = {v.var: v for v in audit_trace(trace).variables}
    planted = audited.pop("bert/pooler/dense/kernel:0")
    assert (planted.verdict, planted.step, planted.by) == ("disagrees", 1, "re-execution"), planted
    assert "var/bert/pooler/dense/kernel:0" in planted.detail
    assert all(v.verdict == "agrees" for v in audited.values()), [v for v in audited.values() if not v.ok]


def _t2t_adafactor(trace):
    """tensor2tensor's Adafactor, held to what t2t's code and the driver's hparams make: the rate of
    its schedule constant * linear_warmup * rsqrt_decay * rsqrt_hidden_size (2.0, 4 warmup steps,
    hidden size 16) at each step's counter, never Adafactor's `* 1e-30` addend; its slots, made in
    the order vr, vc for a matrix (row and column means of g^2) and v for a vector; the hooks'
    fetches of the global step that the train op increments, reported as races."""
    assert trace.names("lr") == ["learning_rate"]
    for k, step in enumerate(trace):
        counter = step.info["global_step"] - 1
        rate = 2.0 * min(1.0, counter / 4.0) * max(counter, 4.0) ** -0.5 * 16 ** -0.5
        assert float(step["lr/learning_rate"]) == pytest.approx(rate, rel=1e-6, abs=1e-12), k
    shapes = {name: trace.initial["var/" + name].shape for name in trace.initial.names("var")}
    for slot, fact in trace.meta["slots"].items():
        matrix = len(shapes[fact["var"]]) >= 2
        truth = {("Adafactor", True): "second moment, factored: rows", ("Adafactor_1", True):
                 "second moment, factored: columns", ("Adafactor", False): "second moment"}[fact["arg"], matrix]
        assert fact["role"] == truth, (slot, fact)
    raced = {(r["tensor"], r["variable"]) for r in trace.meta["races"]}
    assert ("fetch/global_step:0", "global_step:0") in raced, raced


TRUTHS = {"t2t_adafactor": _t2t_adafactor}  # a program's own truths, beside those every program is held to


def _interpreter(legacy_python, program):
    """The program's legacy environment, beside the one the fixture found (built by tools/bootstrap)."""
    import os

    python = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(legacy_python))), program.env, "bin",
                          "python")
    assert os.path.exists(python), "%s is not built: run tools/bootstrap" % python
    return python


def _variable(grad_name):
    """The variable of a gradient's name: a sparse one's rows and indices are its two parts, a
    clipped one's gradient before clipping is beside it, and each micro-batch's too."""
    for part in ("/values", "/indices", UNCLIPPED, MICRO):
        if grad_name.endswith(part):
            return grad_name[:-len(part)]
    return grad_name
