"""Recorder tests run in both worlds: TF 1.15.5 (legacy) and TF 2.21 `tf.compat.v1` graph
mode (modern). Tests marked `tf1` need TF 1.15 (tf.estimator, tf_slim) and run in the
legacy environment only."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tf():
    import tracekit.tf1  # noqa: F401  # selects tf-keras before TensorFlow on TF 2
    import tensorflow

    return tensorflow


@pytest.fixture
def graph(tf):
    """A fresh graph as the default one (TF 2 builds graph-mode ops inside it)."""
    g = tf.Graph()
    with g.as_default():
        yield g

