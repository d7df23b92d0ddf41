"""Gradients clipped by tf.clip_by_global_norm in TF 1.15 (plain_loop.py --clip): the golden
holds what the update applied under the variable's name and what clipping was given beside it
("<var>@unclipped"). A port that clips the same way, by tf.clip_by_global_norm in its step or
by its Keras optimizer's global_clipnorm, matches on both; one that clips otherwise or not at
all departs at step 0, and what it did not clip is said, not missed."""

from __future__ import annotations

import pytest

import tracekit
from tracekit.keys import UNCLIPPED

from ..support.recording import record_plain_loop

NORM = 0.1  # the recorded gradients' global norm is about 1: clipping is in force


@pytest.fixture(scope="module")
def golden(legacy_python, tmp_path_factory):
    return record_plain_loop(legacy_python, tmp_path_factory.mktemp("clip") / "clip.h5", "--steps", 5, "--clip", NORM,
                             "--dropout", 0)


def _compare(tf2, golden, clip_in_step, **adam):
    tf = tf2.tf
    model = tf.keras.Sequential([tf.keras.layers.Dense(5, activation="relu", name="hidden"),
                                 tf.keras.layers.Dense(1, name="out")])
    model.build((None, 3))
    legacy = adam.pop("legacy", False)
    optimizer = (tf.keras.optimizers.legacy.Adam if legacy else tf.keras.optimizers.Adam)(0.05, epsilon=1e-8, **adam)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(inputs["x:0"]) - 1.0))
        grads = tape.gradient(loss, model.trainable_variables)
        if clip_in_step:
            grads, _ = tf.clip_by_global_norm(grads, NORM)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}
    with tf2.replay(golden, step, model=model) as actual:
        return tracekit.compare(golden, actual, tracekit.Tolerance.training())


@pytest.mark.parametrize("clip_in_step, adam", [(True, {}), (False, {"global_clipnorm": NORM}),
                                                (False, {"global_clipnorm": NORM, "legacy": True})],
                         ids=["clip_by_global_norm", "global_clipnorm", "legacy-global_clipnorm"])
def test_a_port_that_clips_the_same_way_matches_before_and_after_clipping(tf2, golden, clip_in_step, adam):
    result = _compare(tf2, golden, clip_in_step, **adam)
    assert result.ok and not result.missing, result.report()
    with tracekit.open(golden) as trace:
        unclipped = [n for n in trace.names("grad") if n.endswith(UNCLIPPED)]
    assert len(unclipped) == 4 and {"grad/" + n for n in unclipped} <= {t.key for t in result.tensors}


@pytest.mark.parametrize("clip_in_step, adam", [(False, {}), (False, {"clipnorm": NORM})],
                         ids=["not-clipped", "clipnorm-per-tensor"])
def test_a_port_that_clips_otherwise_departs_at_step_0(tf2, golden, clip_in_step, adam):
    result = _compare(tf2, golden, clip_in_step, **adam)
    first = result.first_divergence
    assert not result.ok and first.step == 0 and first.kind == "grad", result.report()
    assert not result.missing
    if not adam:  # nothing clipped: the gradients before clipping are said not compared, with why
        assert all("clipped no gradient" in why for key, why in result.not_compared.items() if UNCLIPPED in key)
        assert sum(UNCLIPPED in key for key in result.not_compared) == 4
