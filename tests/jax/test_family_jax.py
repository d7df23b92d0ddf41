"""The generated family (tools/family_spec.py: ReLU, tanh and GELU MLPs and a max-pooling conv net;
Adam, Momentum and RMSProp; batch 8 to 64; dropout on and off), recorded on TF 1.15 at test time
and replayed into JAX ports (tools/ports/jax/family.py: flax modules, optax transformations, a
jitted step), judged locally: every step started from the golden's state, a step that fails the
default tolerance judged by the float64 arbiter (the train state cast up under
jax_enable_x64). Each correct port MATCHes, and each wrong port departs at its slip's step, the
arbiter saying it is the port's. The same runs as tests/torch/test_family_torch.py's."""

from __future__ import annotations

import functools
import os

import pytest

from tools import family_spec as spec
from tracekit.comparison.slips import SLOT_INITIAL
from tracekit.keys import INITIAL_STEP
from tools.ports.jax import family

from ..support import LONG_FAMILY, LONG_STEPS, PORTED_FAMILY as FAMILY, PORTED_STEPS as STEPS

RUNS = spec.family(FAMILY, STEPS)


def test_the_ports_cover_the_familys_axes():
    assert {r.model for r in RUNS} == set(spec.MODELS) and {r.optimizer for r in RUNS} == set(spec.OPTIMIZERS)
    assert {bool(r.dropout) for r in RUNS} == {True, False} and {r.slip for r in RUNS} == set(spec.SLIPS)


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS, ids=[run.name for run in RUNS])
def test_the_correct_jax_port_matches_and_its_slip_departs_at_its_step(tj, ported_family, run):
    golden = os.path.join(ported_family, run.name + ".h5")
    result = tj.check(golden, make_port=functools.partial(family.make_port, run), judge="local")
    assert result.ok and result.judged == "local" and result.steps == STEPS, result.report()
    assert all(a.explained for a in result.arbitration.steps), result.report()
    kinds = {t.kind for t in result.tensors}
    assert {"loss", "lr", "grad", "var", "slot"} <= kinds and ("random" in kinds) == bool(run.dropout)
    wrong = tj.check(golden, make_port=functools.partial(family.make_port, run, True), judge="local")
    assert not wrong.ok and wrong.first_divergence.step == run.slip_at, wrong.report()
    assert wrong.arbitration.steps[-1].step == run.slip_at and wrong.arbitration.steps[-1].verdict == "port"


@pytest.mark.slow
@pytest.mark.parametrize("run", spec.family(LONG_FAMILY, LONG_STEPS), ids=lambda run: run.name)
def test_a_200_step_golden_is_judged(tj, long_ported_family, run):
    # The judged check's default for a factory's port on a golden this long: the local view.
    golden = os.path.join(long_ported_family, run.name + ".h5")
    result = tj.check(golden, make_port=functools.partial(family.make_port, run))
    assert result.ok and result.judged == "local" and result.steps == LONG_STEPS == 200, result.report()
    wrong = tj.check(golden, make_port=functools.partial(family.make_port, run, True))
    assert not wrong.ok and wrong.first_divergence.step == run.slip_at, wrong.report()


def test_optax_rmsprop_started_at_its_default_departs_at_the_initial_state(tj, ported_family):
    # optax.rmsprop's mean squares start at initial_scale=0.0, TF1's at 1.0: the port's own start, which
    # optax made with the train state, is the replay's initial state of those slots, named by the hint
    run = next(run for run in RUNS if run.optimizer == "rmsprop")
    golden = os.path.join(ported_family, run.name + ".h5")
    result = tj.check(golden, make_port=functools.partial(family.make_port, run, rms_start=0.0), judge="plain")
    divergence = result.first_divergence
    assert not result.ok and (divergence.step, divergence.kind) == (INITIAL_STEP, "slot"), result.report()
    assert SLOT_INITIAL in {hint.code for hint in result.slips} and "optax" in result.report(), result.report()

