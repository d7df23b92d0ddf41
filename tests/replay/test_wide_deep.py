"""A canned TF1 Wide & Deep model (DNNLinearCombinedClassifier on feature columns: partitioned
variables, FTRL and Adagrad, sparse gradients), recorded for real in TF 1.15 (the corpus
program estimator_wide_deep), and the Keras port a team would write today: preprocessing
layers, a LinearModel over one-hot features, an Embedding, Keras Ftrl and Adagrad
(tools/corpus/ports/estimator_wide_deep.py). The correct port matches with var_map="auto" whichever
optimizer it applies first, reading the features and labels by name as its model_fn did; each
usual slip is caught where it happens, with its hint."""

from __future__ import annotations

import os

import pytest

import tracekit
from tracekit.comparison import sparse
from tracekit.comparison.slips import LOSS_AVERAGED, OPTIMIZER_SETTING, SLOT_INITIAL
from tracekit.keys import INITIAL_STEP

from tools.corpus.ports.estimator_wide_deep import port

from ..support import ROOT, run_python



@pytest.fixture(scope="module")
def golden(legacy_python, tmp_path_factory):
    where = tmp_path_factory.mktemp("wide_deep")
    path = str(where / "wide_deep.h5")
    run_python(legacy_python, ["-m", "tracekit", "record", "-o", path, "--",
                               os.path.join(ROOT, "tools", "corpus", "programs", "estimator_wide_deep.py"),
                               "--steps", "4", str(where / "model")], cwd=ROOT)
    return path


def trace_meta(path):
    with tracekit.open(path) as trace:
        return trace.meta


def _compare(tf2, golden, **slips):
    model, step, _ = port(tf2.tf, **slips)
    with tf2.replay(golden, step, model=model) as actual:
        return tracekit.compare(golden, actual, tracekit.Tolerance.training())


@pytest.mark.parametrize("ftrl_first, family", [(True, "keras"), (False, "keras"), (False, "legacy"), (True, "v1")],
                         ids=["ftrl-first", "adagrad-first", "legacy-optimizers", "tf.compat.v1-optimizers"])
def test_the_natural_keras_port_matches(tf2, golden, ftrl_first, family):
    result = _compare(tf2, golden, ftrl_first=ftrl_first, family=family)
    assert result.ok and not result.missing, result.report()
    with tracekit.open(golden) as trace:
        variables = trace.names("var")
        rates = trace.names("lr")
    # every partitioned variable (one partition each) was paired by name, nothing left out
    assert sum(name.endswith("/part_0:0") for name in variables) == 9
    uncounted = {"global_step:0"} if family == "v1" else set()  # given no global_step=, nothing counts steps
    assert {t.name for t in result.tensors if t.kind == "var"} == set(variables) - uncounted
    assert all("pass global_step=" in result.not_compared["var/" + name] for name in uncounted)
    assert sorted(t.name for t in result.tensors if t.kind == "lr") == sorted(rates) and len(rates) == 2
    forms = {t.name: t.form for t in result.tensors if t.form}
    embedding = "dnn/input_from_feature_columns/input_layer/shape_embedding/embedding_weights/part_0:0"
    assert forms == {embedding: sparse.BY_ROWS, embedding + "/indices": sparse.INDEX_SET,
                     "linear/linear_model/color/weights/part_0:0": sparse.DENSIFIED,
                     "linear/linear_model/color_X_shape/weights/part_0:0": sparse.DENSIFIED}
    assert "compared in another form (4)" in result.report()
    # the inputs keep the structure the TF1 program had: the tf.data element, features and labels
    structures = trace_meta(golden)["inputs"]
    assert sorted(structures) == ["element", "features", "labels"]
    assert structures["features"]["dict"] == {"color": "IteratorGetNext:0", "shape": "IteratorGetNext:1",
                                              "size": "IteratorGetNext:2", "weight": "IteratorGetNext:3"}


def test_learning_rates_swapped_fail_at_step_0(tf2, golden):
    result = _compare(tf2, golden, ftrl_lr=0.001, adagrad_lr=0.005)
    first = result.first_divergence
    assert not result.ok and first.step == 0 and first.kind == "lr", result.report()


def test_a_sum_ported_as_a_mean_fails_at_step_0_with_its_hint(tf2, golden):
    result = _compare(tf2, golden, reduce=tf2.tf.reduce_mean)
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == (0, "loss/loss"), result.report()
    assert [h.code for h in result.slips] == [LOSS_AVERAGED]


def test_adagrads_initial_accumulator_is_compared(tf2, golden):
    result = _compare(tf2, golden, initial_accumulator_value=0.0)
    first = result.first_divergence
    assert not result.ok and first.step == INITIAL_STEP and first.kind == "slot", result.report()
    assert "/Adagrad:0" in first.name and [h.code for h in result.slips] == [SLOT_INITIAL]


def test_an_ftrl_setting_that_differs_fails_at_step_0_and_is_named(tf2, golden):
    result = _compare(tf2, golden, l2=0.5)
    first = result.first_divergence
    assert not result.ok and first.step == 0 and first.name.startswith("linear/"), result.report()
    assert [h.code for h in result.slips] == [OPTIMIZER_SETTING]
    assert "sets l2_regularization_strength=0.5 where the TF1 update of" in result.report()
    assert "used l2=0" in result.report()


def test_a_crossed_feature_hashed_otherwise_fails_at_step_0(tf2, golden):
    result = _compare(tf2, golden, cross_order=(1, 0))
    first = result.first_divergence
    assert not result.ok and first.step == 0, result.report()
    assert first.key == "grad/linear/linear_model/color_X_shape/weights/part_0:0", result.report()


# Kernels another machine would run, pinned on this one (TensorFlow reads them at start-up: each
# replay runs in a process of its own): oneDNN on and off, its instruction set capped, one thread.
KERNELS = {
    "onednn": {"TF_ENABLE_ONEDNN_OPTS": "1"},
    "eigen": {"TF_ENABLE_ONEDNN_OPTS": "0"},
    "sse41": {"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    "avx2-one-thread": {"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "AVX2", "TF_NUM_INTRAOP_THREADS": "1",
                        "TF_NUM_INTEROP_THREADS": "1"},
}


@pytest.fixture(scope="module")
def big_golden(legacy_python, tmp_path_factory):
    """512 rows a batch, features 10x larger, 32 hidden units: the head's summed loss gives
    gradients near 1e2 and Adagrad accumulators past 1e5 at step 0."""
    where = tmp_path_factory.mktemp("wide_deep_big")
    path = str(where / "wide_deep_big.h5")
    run_python(legacy_python, ["-m", "tracekit", "record", "-o", path, "--",
                               os.path.join(ROOT, "tools", "corpus", "programs", "estimator_wide_deep.py"),
                               "--steps", "2", "--batch", "512", "--hidden", "32", "--scale", "10",
                               str(where / "model")], cwd=ROOT)
    return path


@pytest.mark.parametrize("kernels", sorted(KERNELS))
def test_large_sums_pass_on_every_kernel(big_golden, tmp_path, kernels):
    import sys

    with tracekit.open(big_golden) as trace:
        biggest = max(float(abs(trace.step(0)[key]).max()) for key in trace.step(0) if key.startswith("slot/"))
    assert biggest > 1e4  # what the test is about: accumulators that large at the first step
    out = str(tmp_path / "actual.h5")
    run_python(sys.executable, [os.path.join(ROOT, "tests", "replay", "replay_child.py"), "wide_deep_32",
                                big_golden, out, "2"], env=dict(KERNELS[kernels], CUDA_VISIBLE_DEVICES=""),
               unset=[v for v in ("TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA") if v not in KERNELS[kernels]])
    result = tracekit.compare(big_golden, out, tracekit.Tolerance.training())
    assert result.ok, result.report()


@pytest.mark.parametrize("slip, where", [
    ({"initial_accumulator_value": 0.0}, (INITIAL_STEP, "slot")),  # Keras' Adagrad start where TF1's is 0.1
    ({"ftrl_lr": 0.001, "adagrad_lr": 0.005}, (0, "lr")),
    ({"reduce": "mean"}, (0, "loss")),  # the head sums the batch's losses
])
def test_wrong_ports_still_fail_on_large_sums(tf2, big_golden, slip, where):
    if slip.get("reduce") == "mean":
        slip = dict(slip, reduce=tf2.tf.reduce_mean)
    result = _compare(tf2, big_golden, hidden=32, **slip)
    first = result.first_divergence
    assert not result.ok and (first.step, first.kind) == where, result.report()


def test_a_wide_part_of_embeddings_pairs_by_shared_words(tf2, golden, capsys):
    # linear_color/embeddings (4, 1) for TF1's linear/linear_model/color/weights/part_0 (4, 1): no name
    # rule sees it, the words they share do
    from tracekit.cli import main

    result = _compare(tf2, golden, linear="embeddings")
    assert result.ok and not result.missing, result.report()
    model, step, _ = port(tf2.tf, linear="embeddings")
    with tf2.replay(golden, step, model=model, steps=1) as actual:
        how = actual.meta["replay"]["matched_by"]
    assert {name: how[name] for name in how if name.startswith("linear/")} == {
        "linear/linear_model/color/weights/part_0:0": "shared words",
        "linear/linear_model/color_X_shape/weights/part_0:0": "shared words",
        "linear/linear_model/bias_weights/part_0:0": "shared words",
        "linear/linear_model/size/weights/part_0:0": "words"}
    assert main(["map", golden, "tools.corpus.ports.estimator_wide_deep:port_with_embeddings"]) == 0
    out = capsys.readouterr().out
    assert "every variable pairs" in out and "/wide/linear_color/embeddings:0  (the most words in common)" in out


def test_the_proposed_var_map_is_pasted_and_replays(tf2, golden, capsys):
    # names that share nothing with the golden's: the replay stops, printing a var_map to paste
    import functools

    from tracekit.cli import main

    anonymous = functools.partial(port, tf2.tf, linear="embeddings", wide_names=("a", "b", "c", "d"))
    model, step, _ = anonymous()
    with pytest.raises(tracekit.ReplayError) as err:
        tf2.replay(golden, step, model=model)
    text = str(err.value)
    assert "pass var_map= (a dict, regex rules or a callable; None for a golden variable" in text
    start = text.index("    var_map = {")
    pasted = {}
    exec(text[start:].strip(), {"tracekit": tracekit}, pasted)  # what a person pastes into the test
    # the Keras model's own name carries a number in a process that built one before: "wide_deep_3/..."
    assert {golden: port_name.split("/", 1)[1] for golden, port_name in pasted["var_map"].items()} == {
        "linear/linear_model/color/weights/part_0:0": "wide/a/embeddings:0",
        "linear/linear_model/color_X_shape/weights/part_0:0": "wide/b/embeddings:0",
        "linear/linear_model/bias_weights/part_0:0": "wide/d:0"}  # size's kernel is the only (1, 1) one: paired
    assert "the only one left on both sides" in text
    with tf2.replay(golden, step, model=model, var_map=pasted["var_map"]) as actual:
        result = tracekit.compare(golden, actual, tracekit.Tolerance.training())
    assert result.ok, result.report()
