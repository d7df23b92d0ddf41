"""TF1's optimizers (plain_loop.py --optimizer NAME, recorded for real in TF 1.15) replayed into a
PyTorch port with the torch optimizer a team would pick for each, configured as TF1's: its state
pairs with TF1's slots by role (Adam's m and v, Adagrad's accumulator, RMSProp's mean square and
momentum, centered RMSProp's mean gradient, Adadelta's two accumulators) and the port matches; a
port whose optimizer would start its state elsewhere than TF1's departs at the initial state, the
hint saying which slot and where TF1 started it."""

from __future__ import annotations

import pytest

from tracekit.comparison.slips import SLOT_INITIAL
from tracekit.keys import INITIAL_STEP

from ..support.recording import record_optimizers

RECORDED = ("adam", "adagrad", "rmsprop", "rmsprop-centered", "adadelta", "adamw")


@pytest.fixture(scope="module")
def goldens(legacy_python, tmp_path_factory):
    return record_optimizers(legacy_python, tmp_path_factory.mktemp("optimizers"), RECORDED)


def _optimizers():
    import torch

    from tools.ports.torch.tf_forms import TFAdam, TFAdamW, TFStartRMSprop

    return {  # (golden, port) -> the port's optimizer of these parameters, as plain_loop.py configures TF1's
        ("adam", "tf"): lambda p: TFAdam(p, lr=0.05, eps=1e-8),
        ("adagrad", "torch"): lambda p: torch.optim.Adagrad(p, lr=0.05, initial_accumulator_value=0.1),
        ("rmsprop", "torch"): lambda p: TFStartRMSprop(p, lr=0.05, alpha=0.9, eps=1e-10, momentum=0.5),
        ("rmsprop-centered", "torch"): lambda p: TFStartRMSprop(p, lr=0.05, alpha=0.9, eps=1e-10, momentum=0.5,
                                                                centered=True),
        ("adadelta", "torch"): lambda p: torch.optim.Adadelta(p, lr=1.0, rho=0.95, eps=1e-7),
        ("adamw", "tf"): lambda p: TFAdamW(p, lr=0.05, eps=1e-8, weight_decay=0.01),  # tf.contrib.opt's
        # slips
        ("adamw", "torch"): lambda p: torch.optim.AdamW(p, lr=0.05, eps=1e-8, weight_decay=0.01),
        ("adagrad", "torch default"): lambda p: torch.optim.Adagrad(p, lr=0.05),
        ("rmsprop", "torch start"): lambda p: torch.optim.RMSprop(p, lr=0.05, alpha=0.9, eps=1e-10, momentum=0.5),
    }


def _port(make_optimizer):
    import torch

    model = torch.nn.Sequential()
    model.add_module("hidden", torch.nn.Linear(3, 5))
    model.add_module("relu", torch.nn.ReLU())
    model.add_module("out", torch.nn.Linear(5, 1))
    optimizer = make_optimizer(model.parameters())

    def step(inputs):
        optimizer.zero_grad()
        loss = ((model(inputs["x:0"]) - 1.0) ** 2).mean()
        loss.backward()
        optimizer.step()
        return loss
    return model, optimizer, step


def _check(tt, golden, make_optimizer):
    model, optimizer, step = _port(make_optimizer)
    return tt.check(golden, step, model=model, optimizer=optimizer, tolerance="training")


@pytest.mark.parametrize("name", RECORDED)
def test_the_torch_optimizer_configured_as_tf1s_matches(tt, goldens, name):
    port = next(port for (golden, port) in _optimizers() if golden == name)
    result = _check(tt, goldens[name], _optimizers()[name, port])
    assert result.ok and not result.missing, result.report()
    slots = {t.key for t in result.tensors if t.kind == "slot"}
    assert slots and all(result.tensor(*key.split("/", 1)).steps >= 5 for key in slots), sorted(slots)


@pytest.mark.parametrize("name, port, first", [
    ("adagrad", "torch default", (INITIAL_STEP, "slot")),  # its accumulator starts at 0, TF1's at 0.1
    ("rmsprop", "torch start", (INITIAL_STEP, "slot")),  # its mean square starts at 0, TF1's at 1
])
def test_a_torch_optimizer_left_at_torchs_defaults_departs(tt, goldens, name, port, first):
    result = _check(tt, goldens[name], _optimizers()[name, port])
    divergence = result.first_divergence
    assert not result.ok and (divergence.step, divergence.kind) == first, result.report()
    assert SLOT_INITIAL in {hint.code for hint in result.slips}, result.report()
    assert "PyTorch" in result.report()  # the advice says what to set in a PyTorch port


def test_torchs_adamw_for_tf_contribs_is_named_its_decay_times_the_rate(tt, goldens):
    # tf.contrib.opt.AdamWOptimizer decays a variable by weight_decay x var a step; torch.optim.AdamW by
    # lr x weight_decay x var: the same number, another decay, caught at step 0 and named so
    result = _check(tt, goldens["adamw"], _optimizers()["adamw", "torch"])
    divergence = result.first_divergence
    assert not result.ok and divergence.step == 0 and divergence.kind == "var", result.report()
    assert "weight-decay-rate" in [f.code for f in result.fingerprints], result.report()
    assert "the port's decay is TF1's times the learning rate" in result.report()


@pytest.mark.parametrize("name, port", [("adam", "tf"), ("adagrad", "torch"), ("adagrad", "torch default"),
                                        ("rmsprop", "torch"), ("adamw", "torch")])
def test_a_second_check_on_the_optimizer_an_earlier_one_stepped_judges_alike(tt, goldens, name, port):
    # torch's optimizers make their state at the first step (Adagrad's in its constructor): a
    # replay into one an earlier replay stepped restarts that state where torch would have made
    # it, so the port's own start (Adagrad's default 0 against TF1's 0.1) is read as before, and
    # a hand-written one's stepped state is not read as its start at all
    model, optimizer, step = _port(_optimizers()[name, port])
    first, second = (tt.check(goldens[name], step, model=model, optimizer=optimizer, tolerance="training")
                     for _ in range(2))
    where = [r.first_divergence and (r.first_divergence.step, r.first_divergence.key) for r in (first, second)]
    assert first.ok == second.ok and where[0] == where[1], second.report()
    assert first.ok == (port != "torch default" and name != "adamw"), first.report()
