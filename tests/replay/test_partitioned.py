"""A TF1 embedding table held in partitions (fixed_size_partitioner), recorded for real in TF
1.15, replayed into a Keras Embedding that holds it whole: one partition maps by name, several
are converted (concatenated along the first axis) without being asked, their sparse gradients
and Adagrad slots with them; lookups that spread rows over the partitions (partition_strategy
"mod") take the conversion by name; a port whose table has other rows is refused, naming both
sides."""

from __future__ import annotations

import os

import pytest

import tracekit
from tracekit.errors import ReplayError

from ..support import ROOT, run_python
from ..support.recording import SCRIPTS


@pytest.fixture(scope="module")
def goldens(legacy_python, tmp_path_factory):
    where = tmp_path_factory.mktemp("partitioned")
    out = {}
    for parts, strategy in ((1, "div"), (3, "div"), (3, "mod")):
        out[parts, strategy] = path = str(where / ("parts%d_%s.h5" % (parts, strategy)))
        run_python(legacy_python, ["-m", "tracekit", "record", "-o", path, "--",
                                   os.path.join(SCRIPTS, "partitioned.py"), "--parts", str(parts),
                                   "--strategy", strategy], cwd=ROOT)
    return out


def _port(tf, rows=12, learning_rate=0.1):
    model = tf.keras.Sequential([tf.keras.layers.Embedding(rows, 3, name="embedding"),
                                 tf.keras.layers.Dense(1, name="out")])
    model.build((None,))
    optimizer = tf.keras.optimizers.Adagrad(learning_rate)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            logits = model(inputs["ids:0"])
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=inputs["labels:0"], logits=logits))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}
    return model, step


@pytest.mark.parametrize("parts", [1, 3])
def test_a_partitioned_table_replays_into_one_keras_variable(tf2, goldens, parts):
    model, step = _port(tf2.tf)
    with tf2.replay(goldens[parts, "div"], step, model=model) as actual:
        result = tracekit.compare(goldens[parts, "div"], actual, tracekit.Tolerance.training())
    assert result.ok and not result.missing, result.report()
    with tracekit.open(goldens[parts, "div"]) as golden:
        tables = sorted(n for n in golden.names("var") if n.startswith("embedding/"))
        assert len(tables) == parts
        compared = {t.key for t in result.tensors}
        for name in tables:  # each partition's value, gradient and slot, in the golden's names
            assert {"var/" + name, "grad/" + name, "slot/%s/Adagrad:0" % name[:-2]} <= compared


def test_a_slip_in_a_partitioned_table_is_caught_at_step_0(tf2, goldens):
    model, step = _port(tf2.tf, learning_rate=0.2)
    with tf2.replay(goldens[3, "div"], step, model=model) as actual:
        result = tracekit.compare(goldens[3, "div"], actual, tracekit.Tolerance.training())
    assert not result.ok and result.first_divergence.step == 0, result.report()


def test_rows_spread_over_the_partitions_take_the_mod_conversion(tf2, goldens):
    golden = goldens[3, "mod"]
    model, step = _port(tf2.tf)
    with tf2.replay(golden, step, model=model) as actual:  # the automatic conversion is "div": wrong rows
        result = tracekit.compare(golden, actual, tracekit.Tolerance.training())
    assert not result.ok and (result.first_divergence.step, result.first_divergence.key) == (0, "loss/loss")
    names = ["embedding/embeddings/part_%d:0" % k for k in range(3)]
    model, step = _port(tf2.tf)
    convert = [tf2.partitioned(names, model.get_layer("embedding").embeddings, strategy="mod")]
    with tf2.replay(golden, step, model=model, convert=convert) as actual:
        result = tracekit.compare(golden, actual, tracekit.Tolerance.training())
    assert result.ok and not result.missing, result.report()


def test_a_table_of_other_rows_is_refused_naming_the_partitions(tf2, goldens):
    model, step = _port(tf2.tf, rows=13)
    with pytest.raises(ReplayError) as caught:
        tf2.replay(goldens[3, "div"], step, model=model)
    message = str(caught.value)
    assert "embedding/embeddings/part_0:0 (4, 3) vs TF2 embedding/embeddings:0 (13, 3)" in message
    assert "only in the golden: embedding/embeddings/part_1:0 (4, 3)" in message
    assert "embedding/embeddings is held in 3 TF1 partitions, (12, 3) as a whole" in message
