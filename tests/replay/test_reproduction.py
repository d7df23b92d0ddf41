"""localize's one-step reproduction is held to failing for the forced replay's reason only: the
same first tensor and named causes, from every variable, slot and counter of the step's
starting state loaded and read back, except what the forced replay lacked too."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tracekit.keys import INITIAL_STEP
from tracekit.judge.reproduction import reproduces

from ..support import build_golden

STATE = {"var/w:0": np.ones(3, "f4"), "var/b:0": np.zeros(3, "f4"), "slot/w/m:0": np.ones(3, "f4"),
         "slot/b/m:0": np.ones(3, "f4"), "var/global_step:0": np.int64(7)}


@pytest.fixture
def excerpt(tmp_path):
    return build_golden(str(tmp_path / "g-step7.h5"), [{"loss/loss": np.float32(1)}], initial=STATE)


def _tensor(key, initial_ok=True):
    """A tensor's result as reproduces() reads it: compared at the initial state, failing there or not."""
    return SimpleNamespace(key=key, by_step={INITIAL_STEP: None}, first_failed=None if initial_ok else INITIAL_STEP)


def _comparison(tensors=(), loaded=None, not_compared=None, first="var/w:0", codes=(), forced=None):
    return SimpleNamespace(tensors=list(tensors), loaded=loaded, not_compared=dict(not_compared or {}), missing=[],
                           forced=forced, first_divergence=None if first is None else SimpleNamespace(key=first),
                           fingerprints=[SimpleNamespace(code=c) for c in codes])


VARS = [_tensor("var/w:0"), _tensor("var/b:0")]
ALL = {"read_back": ["slot/b/m:0", "slot/w/m:0", "var/global_step:0"], "otherwise": []}


def test_a_reproduction_that_loads_everything_and_fails_alike(excerpt):
    ok, said = reproduces(excerpt, _comparison(VARS, ALL, codes=["epsilon"]), _comparison(codes=["epsilon"]))
    assert ok, said
    assert said == ("it loaded and read back 2 variables, 2 slots and 1 counter of the step's starting state; it "
                    "fails at var/w:0, named: epsilon")


def test_state_it_did_not_load_is_another_reason(excerpt):
    # the hand-written optimizer's m of b and the counter start elsewhere (unmapped) in the reproduction only
    partial = {"read_back": ["slot/w/m:0"], "otherwise": []}
    ok, said = reproduces(excerpt, _comparison(VARS, partial), _comparison())
    assert not ok and "but not slot/b/m:0, var/global_step:0 (no port variable holds it)" in said
    # what the forced replay lacked too is said, and no other reason between them
    lacked = {"slot/b/m:0": "TF1 state with no Keras counterpart", "var/global_step:0": "no counter"}
    ok, said = reproduces(excerpt, _comparison(VARS, partial), _comparison(forced={"not_set": lacked}))
    assert ok and "(not slot/b/m:0, var/global_step:0, which the forced replay lacked too)" in said
    # past three, the rest are counted inside the parenthesis
    nothing = {"read_back": [], "otherwise": []}
    lacked = {key: "not held" for key in STATE}
    ok, said = reproduces(excerpt, _comparison([], nothing), _comparison(forced={"not_set": lacked}))
    assert ok and said.startswith("it loaded and read back nothing of the step's starting state (not ")
    assert "and 2 more, which the forced replay lacked too)" in said


def test_state_read_back_otherwise_or_another_tensor_or_cause_fails(excerpt):
    wrong = {"read_back": ["slot/b/m:0", "var/global_step:0"], "otherwise": ["slot/w/m:0"]}
    ok, said = reproduces(excerpt, _comparison(VARS, wrong), _comparison())
    assert not ok and "1 read back otherwise (slot/w/m:0)" in said
    ok, said = reproduces(excerpt, _comparison([_tensor("var/w:0", False), VARS[1]], ALL), _comparison())
    assert not ok and "read back otherwise (var/w:0)" in said
    ok, said = reproduces(excerpt, _comparison(VARS, ALL, first="var/b:0"), _comparison())
    assert not ok and "it fails at var/b:0, not at var/w:0: another reason" in said
    ok, said = reproduces(excerpt, _comparison(VARS, ALL, codes=["epsilon"]), _comparison(codes=["lr-factor"]))
    assert not ok and "the named causes differ (epsilon, against lr-factor)" in said
    ok, said = reproduces(excerpt, _comparison(VARS, ALL, first=None), _comparison())
    assert not ok and said.endswith("; it matches")
