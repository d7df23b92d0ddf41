"""Slips in the recorded parts of a loss (comparison/loss_terms.py): generated losses
a x pg + b x vf + c x entropy whose parts the golden keeps, a port that changes one part's
coefficient by a usual factor, or two at once. One is named as one; two as two, where neither
alone explains the steps; a correct port gets no name."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tracekit
from tracekit.comparison.loss_terms import FACTORS, LOSS_TERM

from ..support import build_golden

COEFFICIENTS = (1.0, 0.25, -0.01)
TERMS = {"losses": {"train": {"loss/loss": {"tensor": "loss:0", "how": "differentiated", "terms": {
    "parts": [{"tensor": "part%d:0" % i, "coefficient": c} for i, c in enumerate(COEFFICIENTS)], "offset": 0.0}}}}}


def _traces(tmp_path, seed, steps, factors):
    rs = np.random.RandomState(seed)
    parts = [[float(np.float32(rs.uniform(0.1, 3.0))) for _ in COEFFICIENTS] for _ in range(steps)]

    def loss(values, weights):
        return np.float32(sum(w * v for w, v in zip(weights, values)))
    golden = build_golden(str(tmp_path / "golden.h5"), ({"loss/loss": loss(p, COEFFICIENTS)} for p in parts),
                          meta=TERMS, info=lambda k: {"loss_terms": {"loss/loss": parts[k]}})
    ported = [c * factors.get(i, 1.0) for i, c in enumerate(COEFFICIENTS)]
    actual = build_golden(str(tmp_path / "actual.h5"), ({"loss/loss": loss(p, ported)} for p in parts),
                          meta={"replay": {"forcing": "state"}})
    return golden, actual


SLIPPED = [f for f in FACTORS if f != 1.0]


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2 ** 16), st.integers(3, 8), st.sets(st.integers(0, 2), min_size=1, max_size=2), st.data())
def test_one_or_two_slipped_parts_are_named(tmp_path_factory, seed, steps, slipped, data):
    factors = {i: data.draw(st.sampled_from(SLIPPED)) for i in sorted(slipped)}
    golden, actual = _traces(tmp_path_factory.mktemp("p"), seed, steps, factors)
    result = tracekit.compare(golden, actual)
    assert not result.ok, result.report()
    named = {f.detail["term"]: f.detail["factor"] for f in result.fingerprints if f.code == LOSS_TERM}
    assert named == factors, result.report()
    assert all(f.detail.get("with") == (2 if len(factors) == 2 else None) for f in result.fingerprints)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2 ** 16), st.integers(3, 8))
def test_a_correct_port_gets_no_name(tmp_path_factory, seed, steps):
    golden, actual = _traces(tmp_path_factory.mktemp("c"), seed, steps, {})
    assert tracekit.compare(golden, actual).fingerprints == []
