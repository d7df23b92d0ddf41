"""The generated family (tools/family_spec.py: ReLU, tanh and GELU MLPs and a max-pooling conv net;
Adam, Momentum and RMSProp; batch 8 to 64; dropout on and off), recorded on TF 1.15 at test time
and replayed into PyTorch ports (tools/ports/torch/family.py), judged locally: every step started
from the golden's state, a step that fails the default tolerance judged by the float64 arbiter
(model.double()). Each correct port MATCHes (the conv net's max-pooling and ReLUs meet round-off
the arbiter explains under some kernels: oneDNN off, one thread), and each wrong port departs at
its slip's step, the arbiter saying it is the port's. The same runs, shortened as
tests/replay/test_family.py shortens them."""

from __future__ import annotations

import functools
import os

import pytest

from tools import family_spec as spec
from tools.ports.torch import family

from ..support import LONG_FAMILY, LONG_STEPS, PORTED_FAMILY as FAMILY, PORTED_STEPS as STEPS

RUNS = spec.family(FAMILY, STEPS)


def test_the_ports_cover_the_familys_axes():
    assert {r.model for r in RUNS} == set(spec.MODELS) and {r.optimizer for r in RUNS} == set(spec.OPTIMIZERS)
    assert {bool(r.dropout) for r in RUNS} == {True, False} and {r.slip for r in RUNS} == set(spec.SLIPS)


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS, ids=[run.name for run in RUNS])
def test_the_correct_pytorch_port_matches_and_its_slip_departs_at_its_step(tt, ported_family, run):
    golden = os.path.join(ported_family, run.name + ".h5")
    result = tt.check(golden, make_port=functools.partial(family.make_port, run), judge="local")
    assert result.ok and result.judged == "local" and result.steps == STEPS, result.report()
    assert all(a.explained for a in result.arbitration.steps), result.report()
    kinds = {t.kind for t in result.tensors}
    assert {"loss", "lr", "grad", "var", "slot"} <= kinds and ("random" in kinds) == bool(run.dropout)
    wrong = tt.check(golden, make_port=functools.partial(family.make_port, run, True), judge="local")
    assert not wrong.ok and wrong.first_divergence.step == run.slip_at, wrong.report()
    assert wrong.arbitration.steps[-1].step == run.slip_at and wrong.arbitration.steps[-1].verdict == "port"


@pytest.mark.slow
@pytest.mark.parametrize("run", spec.family(LONG_FAMILY, LONG_STEPS), ids=lambda run: run.name)
def test_a_200_step_golden_is_judged(tt, long_ported_family, run):
    # The judged check's default for a factory's port on a golden this long: the local view.
    golden = os.path.join(long_ported_family, run.name + ".h5")
    result = tt.check(golden, make_port=functools.partial(family.make_port, run))
    assert result.ok and result.judged == "local" and result.steps == LONG_STEPS == 200, result.report()
    wrong = tt.check(golden, make_port=functools.partial(family.make_port, run, True))
    assert not wrong.ok and wrong.first_divergence.step == run.slip_at, wrong.report()

