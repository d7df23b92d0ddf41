"""Keras 3 ports: the shipped ports rebuilt on Keras 3 with TensorFlow imported before tracekit,
and a port importing Keras 3 itself where tf.keras is tf-keras, replay their goldens; wrong
ports are caught where they depart."""

from __future__ import annotations

import json
import os
import sys

import pytest

from ..support import ROOT, run_python

CHILD = os.path.join(ROOT, "tests", "replay", "keras3_child.py")
EXPECTED = {  # case -> first divergence, None for a port that must pass
    "seed_example": None,
    "estimator_model": None,
    "lr schedule one step off": [0, "lr/learning_rate"],
    "Adam epsilon 1e-7": [0, "var/hidden/kernel:0"],
    "dropout left to TF2": [0, "random/dropout/dropout/random_uniform/RandomUniform:0"],
    "keras_fit": None,
    "keras_fit batch-norm momentum 0.9": [0, "var/bn/moving_mean:0"],
}


@pytest.mark.slow
def test_keras3_ports_replay_with_tensorflow_imported_first():
    proc = run_python(sys.executable, [CHILD], timeout=900, unset=("TF_USE_LEGACY_KERAS",))
    results = {r["case"]: r for r in map(json.loads, proc.stdout.strip().splitlines()[-len(EXPECTED):])}
    assert set(results) == set(EXPECTED)
    for case, first in EXPECTED.items():
        result = results[case]
        assert result["keras"].startswith("3."), result
        assert result["ok"] == (first is None) and result["first"] == first, (case, result["report"])


@pytest.mark.slow
def test_a_keras3_model_replays_where_tf_keras_is_tf_keras():
    # tracekit selected tf-keras for tf.keras; the port imports Keras 3 itself.
    child = os.path.join(ROOT, "tests", "replay", "keras3_in_tf_keras_child.py")
    proc = run_python(sys.executable, [child], timeout=900)
    results = {r["case"]: r for r in map(json.loads, proc.stdout.strip().splitlines()[-2:])}
    port, wrong = results["keras 3 seed port"], results["lr schedule one step off"]
    assert port["keras"].startswith("3.") and port["tf_keras"].startswith("tf_keras"), port
    assert port["ok"], port["report"]
    assert not wrong["ok"] and wrong["first"] == [0, "lr/learning_rate"]
