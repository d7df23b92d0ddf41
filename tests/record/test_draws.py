"""What the recorder says a random draw is for: a dropout's rate, read from the graph, for
every way TF1 code drops out (tf.nn.dropout with rate or keep_prob, tf.layers, TF1 Keras), and
nothing where the graph does not fix it (a rate fed at run time, a draw that is noise). Runs
in both worlds (TF 1.15 and TF 2's compat.v1 graphs)."""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from tracekit.record.draws import draw_uses  # noqa: E402
from tracekit.record.walk import is_random_draw  # noqa: E402

FORMS = {
    "nn rate": lambda x: tf.nn.dropout(x, rate=0.3),
    "nn keep_prob": lambda x: tf.compat.v1.nn.dropout(x, keep_prob=0.6),
    "layers": lambda x: tf.compat.v1.layers.dropout(x, rate=0.25, training=True),
    "keras": lambda x: tf.keras.layers.Dropout(0.4)(x, training=True),
}
RATES = {"nn rate": 0.3, "nn keep_prob": 0.4, "layers": 0.25, "keras": 0.4}


def _uses(build):
    graph = tf.Graph()
    with graph.as_default():
        build(tf.compat.v1.placeholder(tf.float32, [4, 8]))
        draws = [t for op in graph.get_operations() if is_random_draw(op) for t in op.outputs]
        return draws, draw_uses(tf, draws)


@pytest.mark.parametrize("form", list(FORMS))
def test_each_dropout_form_says_its_rate(form):
    draws, uses = _uses(FORMS[form])
    assert len(draws) == 1 and list(uses) == ["random/" + draws[0].name]
    use = uses["random/" + draws[0].name]
    assert use["use"] == "dropout" and use["rate"] == pytest.approx(RATES[form], rel=1e-6)


def test_no_rate_is_claimed_where_the_graph_does_not_fix_one():
    fed = lambda x: tf.nn.dropout(x, rate=tf.compat.v1.placeholder_with_default(0.3, []))  # noqa: E731
    noise = lambda x: x + tf.random.normal(tf.shape(x))  # noqa: E731
    for build in (fed, noise):
        draws, uses = _uses(build)
        assert len(draws) == 1 and uses == {}
