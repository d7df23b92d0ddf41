"""The update audit (store/audit.py): every TF1 update rule against an independent float32
simulation of its kernel, planted errors found and named, the reasons a variable is not
auditable, a racy learning rate, the metadata form, goldens and the CLI."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tracekit
from tracekit.cli import main
from tracekit.store import AuditResult, StepAudit, VariableAudit, audit_step, audit_trace
from tracekit.store._metadata import pack, unpack
from tracekit.store.audit import AGREES, DISAGREES, LIMIT_ULPS, NOT_AUDITABLE, OTHER_RATE
from tracekit.store.update_rules import occurrences

from ..support import ROOT, build_golden, golden

F = np.float32
ONE = F(1)


# Float32 simulations of the TF 1.15 kernels (training_ops.cc), written apart from the audit's
# rules: numpy float32 arithmetic, every operand float32. Each takes the variable, gradient,
# learning rate, slots, hyperparameters, state and attributes; returns the variable and slots after.

def sim_gd(var, g, lr, s, h, st_, a):
    return {"var": var - g * lr}


def sim_prox_gd(var, g, lr, s, h, st_, a):
    prox = var - g * lr
    if h["l1"] > 0:
        return {"var": np.sign(prox) * np.maximum(np.abs(prox) - lr * h["l1"], F(0)) / (ONE + h["l2"] * lr)}
    return {"var": prox / (ONE + h["l2"] * lr)}


def sim_momentum(var, g, lr, s, h, st_, a):
    accum = s["accum"] * h["momentum"] + g
    if a["use_nesterov"]:
        return {"var": var - (g * lr + accum * h["momentum"] * lr), "accum": accum}
    return {"var": var - accum * lr, "accum": accum}


def sim_keras_momentum(var, g, lr, s, h, st_, a):
    accum = s["accum"] * h["momentum"] - g * lr
    return {"var": var + (accum * h["momentum"] - g * lr) if a["use_nesterov"] else var + accum, "accum": accum}


def sim_adam(var, g, lr, s, h, st_, a):
    alpha = lr * np.sqrt(ONE - st_["beta2_power"]) / (ONE - st_["beta1_power"])
    m = s["m"] + (g - s["m"]) * (ONE - h["beta1"])
    v = s["v"] + (g * g - s["v"]) * (ONE - h["beta2"])
    top = (g * (ONE - h["beta1"]) + h["beta1"] * m) if a.get("use_nesterov") else m
    return {"var": var - top * alpha / (np.sqrt(v) + h["epsilon"]), "m": m, "v": v}


def sim_amsgrad(var, g, lr, s, h, st_, a):
    out = sim_adam(var, g, lr, s, h, st_, {})
    vhat = np.maximum(s["vhat"], out["v"])
    alpha = lr * np.sqrt(ONE - st_["beta2_power"]) / (ONE - st_["beta1_power"])
    return dict(out, var=var - out["m"] * alpha / (np.sqrt(vhat) + h["epsilon"]), vhat=vhat)


def sim_adamax(var, g, lr, s, h, st_, a):
    m = s["m"] + (g - s["m"]) * (ONE - h["beta1"])
    v = np.maximum(h["beta2"] * s["v"], np.abs(g))
    return {"var": var - lr / (ONE - st_["beta1_power"]) * (m / (v + h["epsilon"])), "m": m, "v": v}


def sim_rmsprop(var, g, lr, s, h, st_, a):
    ms = s["ms"] + (g * g - s["ms"]) * (ONE - h["rho"])
    mom = s["mom"] * h["momentum"] + g * lr / np.sqrt(ms + h["epsilon"])
    return {"var": var - mom, "ms": ms, "mom": mom}


def sim_centered(var, g, lr, s, h, st_, a):
    ms = s["ms"] + (g * g - s["ms"]) * (ONE - h["rho"])
    mg = s["mg"] + (g - s["mg"]) * (ONE - h["rho"])
    mom = s["mom"] * h["momentum"] + g * lr / np.sqrt(ms - mg * mg + h["epsilon"])
    return {"var": var - mom, "mg": mg, "ms": ms, "mom": mom}


def sim_adagrad(var, g, lr, s, h, st_, a):
    accum = s["accum"] + g * g
    return {"var": var - lr * g / np.sqrt(accum), "accum": accum}


def sim_adagrad_v2(var, g, lr, s, h, st_, a):
    accum = s["accum"] + g * g
    return {"var": var - lr * g / (np.sqrt(accum) + h["epsilon"]), "accum": accum}


def sim_prox_adagrad(var, g, lr, s, h, st_, a):
    accum = s["accum"] + g * g
    rate = lr / np.sqrt(accum)
    prox = var - rate * g
    shrunk = np.sign(prox) * np.maximum(np.abs(prox) - rate * h["l1"], F(0)) if h["l1"] > 0 else prox
    return {"var": shrunk / (ONE + h["l2"] * rate), "accum": accum}


def sim_adadelta(var, g, lr, s, h, st_, a):
    accum = s["accum"] * h["rho"] + g * g * (ONE - h["rho"])
    update = np.sqrt(s["accum_update"] + h["epsilon"]) / np.sqrt(accum + h["epsilon"]) * g
    accum_update = s["accum_update"] * h["rho"] + update * update * (ONE - h["rho"])
    return {"var": var - lr * update, "accum": accum, "accum_update": accum_update}


def sim_ftrl(var, g, lr, s, h, st_, a):
    power = -h["lr_power"]
    new_accum = s["accum"] + g * g
    sigma = (np.power(new_accum, power) - np.power(s["accum"], power)) / lr
    shrunk = g + F(2) * h["l2_shrinkage"] * var if "l2_shrinkage" in h else g
    linear = s["linear"] + shrunk - sigma * var
    quadratic = np.power(new_accum, power) / lr + F(2) * h["l2"]
    new = np.where(np.abs(linear) > h["l1"], (np.sign(linear) * h["l1"] - linear) / quadratic, F(0))
    return {"var": new.astype(F), "accum": new_accum, "linear": linear}


def sim_add_sign(var, g, lr, s, h, st_, a):
    m = s["m"] * h["beta"] + g * (ONE - h["beta"])
    return {"var": var - lr * (h["alpha"] + h["sign_decay"] * np.sign(g) * np.sign(m)) * g, "m": m}


def sim_power_sign(var, g, lr, s, h, st_, a):
    m = s["m"] * h["beta"] + g * (ONE - h["beta"])
    return {"var": var - lr * np.exp(h["logbase"] * h["sign_decay"] * np.sign(g) * np.sign(m)) * g, "m": m}


def positive(rng, shape, low=0.1):
    return (rng.random(shape) + low).astype(F)


def normal(rng, shape, scale=1.0):
    return (rng.normal(size=shape) * scale).astype(F)


def centered_slots(rng, shape):
    mg = normal(rng, shape, 0.1)
    return {"mg": mg, "ms": (mg * mg + positive(rng, shape, 0.01)).astype(F), "mom": normal(rng, shape, 0.01)}


ADAM_HYPER = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}
ADAM_STATE = {"beta1_power": 0.9 ** 3, "beta2_power": 0.999 ** 3}
# op: (simulation, slots before, hyperparameters, state, attributes)
SPECS = {
    "ApplyGradientDescent": (sim_gd, lambda r, sh: {}, {}, {}, {}),
    "ApplyProximalGradientDescent": (sim_prox_gd, lambda r, sh: {}, {"l1": 0.01, "l2": 0.02}, {}, {}),
    "ApplyMomentum": (sim_momentum, lambda r, sh: {"accum": normal(r, sh)}, {"momentum": 0.9}, {},
                      {"use_nesterov": False}),
    "ApplyKerasMomentum": (sim_keras_momentum, lambda r, sh: {"accum": normal(r, sh, 0.1)}, {"momentum": 0.9}, {},
                           {"use_nesterov": True}),
    "ApplyAdam": (sim_adam, lambda r, sh: {"m": normal(r, sh, 0.1), "v": positive(r, sh, 0.0) * F(0.01)},
                  ADAM_HYPER, ADAM_STATE, {"use_nesterov": False}),
    "ApplyAdamWithAmsgrad": (sim_amsgrad, lambda r, sh: {"m": normal(r, sh, 0.1), "v": positive(r, sh, 0.0) * F(0.01),
                                                          "vhat": positive(r, sh, 0.0) * F(0.01)},
                             ADAM_HYPER, ADAM_STATE, {}),
    "ApplyAdaMax": (sim_adamax, lambda r, sh: {"m": normal(r, sh, 0.1), "v": positive(r, sh, 0.0)}, ADAM_HYPER,
                    {"beta1_power": 0.9 ** 3}, {}),
    "ApplyRMSProp": (sim_rmsprop, lambda r, sh: {"ms": positive(r, sh), "mom": normal(r, sh, 0.01)},
                     {"rho": 0.9, "momentum": 0.5, "epsilon": 1e-10}, {}, {}),
    "ApplyCenteredRMSProp": (sim_centered, centered_slots, {"rho": 0.9, "momentum": 0.5, "epsilon": 1e-10}, {}, {}),
    "ApplyAdagrad": (sim_adagrad, lambda r, sh: {"accum": positive(r, sh)}, {}, {}, {"update_slots": True}),
    "ApplyAdagradV2": (sim_adagrad_v2, lambda r, sh: {"accum": positive(r, sh)}, {"epsilon": 1e-7}, {},
                       {"update_slots": True}),
    "ApplyProximalAdagrad": (sim_prox_adagrad, lambda r, sh: {"accum": positive(r, sh)}, {"l1": 0.01, "l2": 0.01},
                             {}, {}),
    "ApplyAdadelta": (sim_adadelta, lambda r, sh: {"accum": positive(r, sh, 0.0), "accum_update": positive(r, sh, 0.0)},
                      {"rho": 0.95, "epsilon": 1e-6}, {}, {}),
    "ApplyFtrl": (sim_ftrl, lambda r, sh: {"accum": positive(r, sh), "linear": normal(r, sh)},
                  {"l1": 0.5, "l2": 0.01, "lr_power": -0.5}, {}, {}),
    "ApplyFtrlV2": (sim_ftrl, lambda r, sh: {"accum": positive(r, sh), "linear": normal(r, sh)},
                    {"l1": 0.5, "l2": 0.01, "l2_shrinkage": 0.1, "lr_power": -0.3}, {}, {}),
    "ApplyAddSign": (sim_add_sign, lambda r, sh: {"m": normal(r, sh)}, {"alpha": 1.0, "sign_decay": 0.5, "beta": 0.9},
                     {}, {}),
    "ApplyPowerSign": (sim_power_sign, lambda r, sh: {"m": normal(r, sh)},
                       {"logbase": 1.0, "sign_decay": 0.5, "beta": 0.9}, {}, {}),
}
SEQUENTIAL_SPARSE = ["ApplyProximalGradientDescent", "ApplyMomentum", "ApplyKerasMomentum", "ApplyRMSProp",
                     "ApplyCenteredRMSProp", "ApplyProximalAdagrad", "ApplyAdadelta", "ApplyFtrl", "ApplyFtrlV2"]


def case(op, seed=0, shape=(5, 3), lr=0.05, hyper=None, attrs=None, state=None, sim_hyper=None, sim_attrs=None,
         sim_lr=None, indices=None, var=None, grad=None, slots=None):
    """One variable "w:0" updated by `op` (its Resource/Sparse prefixes allowed): its golden facts
    and the values before, after (by the float32 simulation) and at the step. sim_*: what the
    simulation uses where it should differ from what the golden records (a planted error)."""
    base = op.replace("Resource", "").replace("Sparse", "")
    sim, init, spec_hyper, spec_state, spec_attrs = SPECS[base]
    rng = np.random.default_rng(seed)
    hyper = dict(spec_hyper if hyper is None else hyper)
    attrs = dict(spec_attrs if attrs is None else attrs)
    state = dict(spec_state if state is None else state)
    var = normal(rng, shape) if var is None else var
    slots = init(rng, shape) if slots is None else slots
    rows = len(indices) if indices is not None else None
    grad = normal(rng, shape if rows is None else (rows,) + shape[1:]) if grad is None else grad
    h = {k: F(v) for k, v in (hyper if sim_hyper is None else sim_hyper).items()}
    st_ = {k: F(v) for k, v in state.items()}
    a = attrs if sim_attrs is None else sim_attrs
    rate = F(lr if sim_lr is None else sim_lr)
    if indices is None:
        after = sim(var, grad, rate, slots, h, st_, a)
    else:  # the sparse kernels' walk: row after row, in the indices' order
        after = {"var": var.copy(), **{k: v.copy() for k, v in slots.items()}}
        for i, row in enumerate(indices):
            out = sim(after["var"][row], grad[i], rate, {k: after[k][row] for k in slots}, h, st_, a)
            for k, v in out.items():
                after[k][row] = v
    slot_names = {arg: "w/%s:0" % arg for arg in slots}
    facts = {"w:0": {"update": op, "lr": "lr:0", "hyper": hyper, "attrs": attrs,
                     "state": {arg: "%s:0" % arg for arg in state}}}
    slots_meta = {slot_names[arg]: {"var": "w:0", "update": op, "arg": arg} for arg in slots}
    before = {"var/w:0": var}
    before.update({"slot/" + slot_names[arg]: v for arg, v in slots.items()})
    before.update({"slot/%s:0" % arg: F(v) for arg, v in state.items()})
    after_values = {"var/w:0": after["var"].astype(F)}
    after_values.update({"slot/" + slot_names[arg]: after[arg].astype(F) for arg in slots})
    values = {"lr/learning_rate": F(lr)}
    if indices is None:
        values["grad/w:0"] = grad
    else:
        values.update({"grad/w:0/values": grad, "grad/w:0/indices": np.asarray(indices, dtype=np.int64)})
    return {"facts": facts, "slots": slots_meta, "before": before, "after": after_values, "values": values}


def audited(c, **options):
    step = audit_step(c["facts"], c["slots"], c["before"], c["after"], c["values"], **options)
    assert len(step.variables) == 1, step
    return step.variables[0]


@pytest.mark.parametrize("op", sorted(SPECS))
def test_every_rule_agrees_with_its_kernel(op):
    for seed in range(3):
        v = audited(case(op, seed))
        assert v.verdict == AGREES, v
        assert v.max_ulps <= 1.0, v  # a faithful float32 kernel stays within half its bound
        assert "ulps of scale" in v.detail


@pytest.mark.parametrize("op", ["ResourceApplyAdam", "ResourceApplyMomentum", "ResourceApplyFtrlV2"])
def test_resource_forms_follow_the_same_rules(op):
    assert audited(case(op)).verdict == AGREES


def test_branches_of_the_rules():
    assert audited(case("ApplyMomentum", attrs={"use_nesterov": True})).verdict == AGREES
    assert audited(case("ApplyKerasMomentum", attrs={"use_nesterov": False})).verdict == AGREES
    assert audited(case("ApplyAdam", attrs={"use_nesterov": True})).verdict == AGREES
    assert audited(case("ApplyProximalGradientDescent", hyper={"l1": 0.0, "l2": 0.1})).verdict == AGREES
    assert audited(case("ApplyProximalAdagrad", hyper={"l1": 0.0, "l2": 0.1})).verdict == AGREES
    assert audited(case("ApplyFtrl", hyper={"l1": 0.5, "l2": 0.0, "lr_power": -0.25})).verdict == AGREES
    assert audited(case("ApplyFtrlV2", hyper={"l1": 0.0, "l2": 0.1, "l2_shrinkage": 0.2,
                                              "lr_power": -0.5})).verdict == AGREES
    # Adagrad told not to update its accumulator (update_slots=False): it reads it as it is
    c = case("ApplyAdagrad", attrs={"update_slots": False})
    assert audited(c).verdict == DISAGREES  # the simulation did update it
    rng = np.random.default_rng(1)
    accum, var, g = positive(rng, (4,)), normal(rng, (4,)), normal(rng, (4,))
    c = case("ApplyAdagrad", attrs={"update_slots": False}, var=var, grad=g, slots={"accum": accum}, shape=(4,))
    c["after"]["slot/w/accum:0"] = accum
    c["after"]["var/w:0"] = var - F(0.05) * g / np.sqrt(accum)
    assert audited(c).verdict == AGREES


@pytest.mark.parametrize("op", SEQUENTIAL_SPARSE)
def test_sparse_forms_walk_rows_in_order_repeats_included(op):
    for form in ("Sparse" + op, "ResourceSparse" + op):
        v = audited(case(form, shape=(6, 3), indices=[4, 1, 4, 0, 4]))
        assert v.verdict == AGREES, v
        assert "repeated indices applied in turn" in v.detail


def test_sparse_forms_leave_other_rows_alone():
    c = case("SparseApplyAdagrad", shape=(6, 2), indices=[5, 2, 0])
    assert audited(c).verdict == AGREES
    c["after"]["var/w:0"] = c["after"]["var/w:0"].copy()
    c["after"]["var/w:0"][3, 1] += F(1e-3)  # a row the gradient does not touch
    v = audited(c)
    assert v.verdict == DISAGREES and v.tensor == "var/w:0" and "at [3, 1]" in v.detail, v


def test_sparse_scalar_rows_and_parallel_kernels_with_repeats():
    assert audited(case("SparseApplyFtrl", shape=(7,), indices=[3, 6, 3])).verdict == AGREES
    v = audited(case("SparseApplyAdagradV2", shape=(6, 2), indices=[1, 1]))
    assert v.verdict == NOT_AUDITABLE and "parallel shards" in v.detail, v
    v = audited(case("SparseApplyAdam", shape=(6, 2), indices=[1, 2]))
    assert v.verdict == NOT_AUDITABLE and "no audit rule for the update op SparseApplyAdam" in v.detail


def test_occurrences_split_repeats_into_rounds():
    rounds = occurrences(np.array([4, 1, 4, 0, 4, 1]))
    assert [r.tolist() for r in rounds] == [[0, 1, 3], [2, 5], [4]]
    assert occurrences(np.zeros(0, dtype=np.int64)) == []


def test_a_learning_rate_off_by_one_percent_disagrees_on_the_variable():
    v = audited(case("ApplyAdam", lr=0.01 * 1.01, sim_lr=0.01))
    assert v.verdict == DISAGREES and v.tensor == "var/w:0", v
    assert v.detail.startswith("var/w:0: max abs ") and "ulps of scale (limit 4)" in v.detail
    assert "slot" not in v.detail  # m and v do not read the rate


def test_adams_epsilon_is_checked():
    # gradients small enough that sqrt(v) is near epsilon: the first step from zero slots
    rng = np.random.default_rng(3)
    shape = (8,)
    slots = {"m": np.zeros(shape, F), "v": np.zeros(shape, F)}
    c = case("ApplyAdam", shape=shape, slots=slots, grad=normal(rng, shape, 1e-6), lr=0.001,
             state={"beta1_power": 0.9, "beta2_power": 0.999}, sim_hyper=dict(ADAM_HYPER, epsilon=1e-7))
    v = audited(c)
    assert v.verdict == DISAGREES and v.tensor == "var/w:0", v
    c = case("ApplyAdam", shape=shape, slots=slots, grad=normal(rng, shape, 1e-6), lr=0.001,
             state={"beta1_power": 0.9, "beta2_power": 0.999})
    assert audited(c).verdict == AGREES


def test_a_flipped_nesterov_flag_disagrees_on_the_variable_only():
    v = audited(case("ApplyMomentum", attrs={"use_nesterov": False}, sim_attrs={"use_nesterov": True}))
    assert v.verdict == DISAGREES and v.tensor == "var/w:0" and "slot" not in v.detail, v


def test_a_slot_off_is_named():
    c = case("ApplyAdam")
    key = "slot/w/v:0"
    c["after"][key] = c["after"][key].copy()
    c["after"][key][2, 1] *= F(1.001)
    v = audited(c)
    assert v.verdict == DISAGREES and v.tensor == key, v
    assert v.detail.startswith("slot v (slot/w/v:0): max abs") and "1 of 15 elements over, worst at [2, 1]" \
        in v.detail, v
    assert "var/w:0" not in v.detail


def test_non_finite_values_must_be_recorded_as_such():
    with np.errstate(invalid="ignore"):
        c = case("ApplyAdagrad", shape=(3,), slots={"accum": np.zeros(3, F)}, grad=np.array([0, 1, 2], F))
    assert np.isnan(c["after"]["var/w:0"][0])  # 0 * rsqrt(0)
    assert audited(c).verdict == AGREES
    c["after"]["var/w:0"] = np.nan_to_num(c["after"]["var/w:0"])
    assert audited(c).verdict == DISAGREES


def test_racy_learning_rate():
    c = case("ApplyMomentum", lr=0.02, sim_lr=0.01)  # the update read the rate step 4 recorded
    race = {"lr": "lr/learning_rate", "counter": "global_step:0", "read": "ExponentialDecay/Cast",
            "increment": "AssignAdd"}
    nearby = {4: {"lr/learning_rate": F(0.01)}, 6: {"lr/learning_rate": F(0.04)}}
    v = audited(c, step=5, rates_nearby=nearby, races=[race])
    assert v.verdict == OTHER_RATE and v.lr_step == 4 and v.ok, v
    assert v.detail == ("agrees with the learning rate of step 4 (a racy read: lr/learning_rate reads "
                        "global_step:0 (op ExponentialDecay/Cast) unordered with its increment (op AssignAdd))")
    v = audited(c, step=5, rates_nearby=nearby)  # no race recorded: a disagreement, and what would agree
    assert v.verdict == DISAGREES and "it would agree with the learning rate step 4 recorded" in v.detail, v
    assert audited(c, step=5, rates_nearby={6: nearby[6]}, races=[race]).verdict == DISAGREES


def not_auditable(c, **options):
    v = audited(c, **options)
    assert v.verdict == NOT_AUDITABLE and v.max_ulps is None and v.ok, v
    return v.detail


def test_reasons_not_auditable():
    c = case("ApplyAdam")
    step = audit_step(None, c["slots"], c["before"], c["after"], c["values"])
    assert step.variables[0].verdict == NOT_AUDITABLE and "no update facts" in step.variables[0].detail
    assert step.variables[0].update == "ApplyAdam"  # known from the slots

    c = case("ApplyAdam")
    c["facts"]["w:0"]["update"] = "assign"
    assert "hand-written update" in not_auditable(c)
    c["facts"]["w:0"]["update"] = "ApplyAdamW"  # no such TF1 kernel: no rule
    assert not_auditable(c) == "no audit rule for the update op ApplyAdamW"

    c = case("ApplyAdam")
    del c["facts"]["w:0"]["hyper"]["epsilon"]
    assert not_auditable(c) == "hyperparameter epsilon not recorded in this golden (not a graph constant)"

    c = case("ApplyMomentum")
    del c["facts"]["w:0"]["attrs"]
    assert not_auditable(c) == "attrs not recorded (use_nesterov decides its arithmetic)"
    c = case("ApplyRMSProp")
    del c["facts"]["w:0"]["attrs"]  # no attribute changes RMSProp's arithmetic
    assert audited(c).verdict == AGREES
    c["facts"]["w:0"]["attrs"] = {"use_locking": True, "multiply_linear_by_lr": True}
    assert not_auditable(c) == "attr multiply_linear_by_lr=True: no audit rule for it"

    c = case("ApplyAdam")
    del c["values"]["lr/learning_rate"]
    assert not_auditable(c) == "its learning rate lr:0 is not recorded at this step"
    c = case("ApplyAdam")
    c["values"]["lr/learning_rate"] = object()  # what is not an array: a digest, a structure
    assert not_auditable(c) == "lr/learning_rate is not kept whole at the step (a digest)"
    c = case("ApplyAdam")
    c["values"]["lr/other:0"] = F(1)
    assert not_auditable(c) == "its learning rate lr:0 is not recorded at this step"
    c = case("ApplyAdam")
    assert "declared sched:0" in not_auditable(c, declared_rates=["sched:0"])

    c = case("ApplyAdam")
    del c["after"]["slot/w/m:0"]
    assert not_auditable(c) == "slot/w/m:0 is not held after the step"
    c = case("ApplyAdam")
    del c["slots"]["w/v:0"]
    assert not_auditable(c) == "its slot v is not in the golden's slots metadata"
    c = case("ApplyAdam")
    c["before"]["var/w:0"] = {"digest": True}
    assert not_auditable(c) == "var/w:0 is not kept whole before the step (a digest)"
    c = case("ApplyAdam")
    c["values"]["grad/w:0"] = c["values"]["grad/w:0"][:2]
    assert "grad/w:0 has shape (2, 3), the variable (5, 3)" in not_auditable(c)


def test_adam_beta_powers_without_state_facts():
    c = case("ApplyAdam")
    del c["facts"]["w:0"]["state"]
    assert audited(c).verdict == AGREES  # the one pair of beta powers before the step
    c["before"]["slot/beta1_power_1:0"] = F(0.5)
    assert "its beta1_power is not recorded in its update facts and the state before holds no single" \
        in not_auditable(c)


def test_hyperparameters_read_from_variables():
    # a Keras optimizer keeps its hyperparameters in variables: the update facts' "state" names them
    c = case("ApplyAdam")
    del c["facts"]["w:0"]["hyper"]["beta1"]
    c["facts"]["w:0"]["state"]["beta1"] = "Adam/beta_1:0"
    assert not_auditable(c) == "Adam/beta_1:0, its beta1, is not held before the step"
    c["before"]["var/Adam/beta_1:0"] = F(0.9)
    assert audited(c).verdict == AGREES
    c["before"]["var/Adam/beta_1:0"] = F(0.8)
    assert audited(c).verdict == DISAGREES


def test_a_variable_the_step_did_not_update():
    c = case("ApplyAdam")
    del c["values"]["grad/w:0"]
    assert "grad/w:0 is not held at the step" in not_auditable(c)  # yet it changed
    c["after"]["var/w:0"] = c["before"]["var/w:0"]
    step = audit_step(c["facts"], c["slots"], c["before"], c["after"], c["values"])
    assert step.variables == () and step.ok  # left alone: not this step's update


@settings(max_examples=60)
@given(shape=hnp.array_shapes(max_dims=3, max_side=6),
       seed=st.integers(0, 2 ** 32 - 1),
       scale=st.sampled_from([1e-6, 1e-3, 1.0, 30.0]),
       lr=st.floats(1e-5, 1.0),
       nesterov=st.booleans())
def test_adam_and_momentum_agree_on_any_shape_and_scale(shape, seed, scale, lr, nesterov):
    rng = np.random.default_rng(seed)
    grad = normal(rng, shape, scale)
    slots = {"m": normal(rng, shape, scale), "v": (positive(rng, shape, 0.0) * F(scale * scale)).astype(F)}
    v = audited(case("ApplyAdam", shape=shape, lr=lr, grad=grad, slots=slots, attrs={"use_nesterov": nesterov}))
    assert v.verdict == AGREES and v.max_ulps <= 1.0, v
    slots = {"accum": normal(rng, shape, scale)}
    v = audited(case("ApplyMomentum", shape=shape, lr=lr, grad=grad, slots=slots, attrs={"use_nesterov": nesterov}))
    assert v.verdict == AGREES and v.max_ulps <= 1.0, v


@settings(max_examples=40)
@given(values=hnp.arrays(np.float32, hnp.array_shapes(max_dims=2, max_side=5),
                         elements=st.floats(-100, 100, width=32)),
       lr=st.floats(1e-3, 1.0), power=st.sampled_from([-0.5, -0.3, 0.0]),
       l1=st.sampled_from([0.0, 0.1, 2.0]))
def test_ftrl_agrees_on_any_values(values, lr, power, l1):
    rng = np.random.default_rng(abs(hash(values.tobytes())) % 2 ** 32)
    slots = {"accum": positive(rng, values.shape), "linear": normal(rng, values.shape)}
    c = case("ApplyFtrlV2", shape=values.shape, lr=lr, grad=values, slots=slots,
             hyper={"l1": l1, "l2": 0.01, "l2_shrinkage": 0.05, "lr_power": power})
    v = audited(c)
    assert v.verdict == AGREES and v.max_ulps <= LIMIT_ULPS, v


def test_result_summary_and_metadata_round_trip():
    good = audited(case("ApplyAdam"))
    bad = audited(case("ApplyAdam", lr=0.011, sim_lr=0.01))
    steps = [StepAudit(0, (good,)), StepAudit(1, (bad,)), StepAudit(2, (good,))]
    result = AuditResult.of_steps(steps, [(3, "no initial state recorded"), (4, "no initial state recorded")], "g.h5")
    assert not result.ok and result.count(DISAGREES) == 1 and result.audited == (0, 1, 2)
    summary = result.variables[0]
    assert summary.verdict == DISAGREES and summary.step == 1
    assert summary.tally == ((DISAGREES, 1), (AGREES, 2))
    stored = unpack(pack(result.to_meta()))  # what a golden's metadata holds
    assert stored["skipped"] == [["no initial state recorded", [3, 4]]]
    again = AuditResult.of(stored, "g.h5")
    assert again == result and again.steps == ()
    assert AuditResult.of(None).variables == () and AuditResult.of(None).ok
    assert VariableAudit.of(good.to_meta()) == good


def adam_golden(path, steps=3, tamper=None, drop_state_at=None, meta=None):
    """A golden of `steps` Adam steps of one variable, its state after each step simulated in
    float32; tamper(k, after) changes what step k records; drop_state_at: a step that keeps no state."""
    rng = np.random.default_rng(7)
    var, m, v = normal(rng, (4, 3)), np.zeros((4, 3), F), np.zeros((4, 3), F)
    h = {k: F(x) for k, x in ADAM_HYPER.items()}
    b1p, b2p = F(0.9), F(0.999)
    initial = {"var/w:0": var, "slot/w/Adam:0": m, "slot/w/Adam_1:0": v, "slot/beta1_power:0": b1p,
               "slot/beta2_power:0": b2p}
    rows = []
    for k in range(steps):
        g, lr = normal(rng, (4, 3)), F(0.01)
        out = sim_adam(var, g, lr, {"m": m, "v": v}, h, {"beta1_power": b1p, "beta2_power": b2p}, {})
        var, m, v = out["var"], out["m"], out["v"]
        b1p, b2p = b1p * F(0.9), b2p * F(0.999)
        values = {"lr/learning_rate": lr, "grad/w:0": g}
        if k != drop_state_at:
            values.update({"var/w:0": var, "slot/w/Adam:0": m, "slot/w/Adam_1:0": v, "slot/beta1_power:0": b1p,
                           "slot/beta2_power:0": b2p})
        rows.append(tamper(k, values) if tamper else values)
    facts = {"w:0": {"update": "ApplyAdam", "lr": "lr:0", "hyper": dict(ADAM_HYPER),
                     "state": {"beta1_power": "beta1_power:0", "beta2_power": "beta2_power:0"},
                     "attrs": {"use_locking": False, "use_nesterov": False}}}
    slots = {"w/Adam:0": {"var": "w:0", "update": "ApplyAdam", "arg": "m"},
             "w/Adam_1:0": {"var": "w:0", "update": "ApplyAdam", "arg": "v"}}
    return build_golden(path, rows, initial, meta=dict({"updates": facts, "slots": slots}, **(meta or {})))


def test_audit_trace_over_a_golden(tmp_path):
    path = adam_golden(str(tmp_path / "adam.h5"), steps=4, drop_state_at=1)
    with tracekit.open(path) as trace:
        result = audit_trace(trace)
        assert result.ok and result.audited == (0, 3) and result.path == path
        assert result.skipped == ((1, "it keeps no variable whole (a step between keyframes)"),
                                  (2, "step 1 keeps no variable whole (a step between keyframes)"))
        assert [v.verdict for v in result.variables] == [AGREES] and result.variables[0].tally == ((AGREES, 2),)
        assert audit_trace(trace, steps=[3]).audited == (3,)
        assert audit_trace(trace, limit=1).audited == (0,)
        with pytest.raises(tracekit.errors.UsageError, match="has 4 steps; step 9 does not exist"):
            audit_trace(trace, steps=[9])


def test_audit_trace_finds_a_racy_rate(tmp_path):
    def tamper(k, values):
        if k == 1:
            values["lr/learning_rate"] = F(0.02)  # step 1 recorded the next rate; its update read 0.01
        if k == 2:
            values["lr/learning_rate"] = F(0.01)
        return values
    race = {"lr": "lr/learning_rate", "counter": "global_step:0", "read": "read", "increment": "inc"}
    path = adam_golden(str(tmp_path / "race.h5"), tamper=tamper, meta={"races": [race]})
    with tracekit.open(path) as trace:
        result = audit_trace(trace)
    assert result.ok and result.variables[0].verdict == OTHER_RATE and result.variables[0].lr_step == 0


def test_verify_audit_and_show(tmp_path, capsys):
    good = adam_golden(str(tmp_path / "good.h5"))

    def tamper(k, values):
        if k == 2:
            values["slot/w/Adam_1:0"] = values["slot/w/Adam_1:0"] * F(1.01)
        return values
    bad = adam_golden(str(tmp_path / "bad.h5"), tamper=tamper)
    assert main(["verify", "--audit", good]) == 0
    out = capsys.readouterr().out
    assert "audit     3 steps audited: 1 variable agrees (limit 4 ulps of scale by rule)" in out
    assert main(["verify", "--audit", good, bad]) == 1
    out = capsys.readouterr().out
    assert "audit     3 steps audited: 1 variable disagrees" in out
    assert "w:0 disagrees at step 2: slot v (slot/w/Adam_1:0): max abs" in out
    assert main(["verify", bad]) == 0  # without --audit: the checksums alone
    assert "\naudit " not in capsys.readouterr().out

    with tracekit.open(bad) as trace:
        stored = audit_trace(trace).to_meta()
    kept = adam_golden(str(tmp_path / "kept.h5"), tamper=tamper, meta={"audit": stored})
    assert main(["show", kept]) == 0
    out = capsys.readouterr().out
    assert "audit     3 steps audited: 1 variable disagrees (limit 4 ulps of scale by rule)" in out
    assert "w:0       ApplyAdam  disagrees  rule  1 disagree, 2 agree" in out
    assert "audit.variables" not in out  # shown as the audit, not dumped with the metadata


def test_verify_audit_on_a_shipped_golden():
    proc = subprocess.run([sys.executable, "-m", "tracekit", "verify", "--audit", golden("momentum_model")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "audit     20 steps audited: 4 variables agree" in proc.stdout
    assert math.isfinite(LIMIT_ULPS)


def test_big_variables_are_audited_part_after_part(monkeypatch):
    from tracekit.store import update_check

    monkeypatch.setattr(update_check, "CHUNK", 4)  # 15 elements: 4 parts; 6 rows of 2: 3 at a time
    c = case("ApplyAdam")
    assert audited(c).verdict == AGREES
    c["after"]["var/w:0"] = c["after"]["var/w:0"].copy()
    c["after"]["var/w:0"][3, 2] += F(0.01)
    v = audited(c)
    assert v.verdict == DISAGREES and "1 of 15 elements over, worst at [3, 2]" in v.detail, v
    c = case("SparseApplyMomentum", shape=(6, 2), indices=[4, 1])
    assert audited(c).verdict == AGREES
    c["after"]["slot/w/accum:0"] = c["after"]["slot/w/accum:0"].copy()
    c["after"]["slot/w/accum:0"][5, 0] += F(0.01)
    v = audited(c)
    assert v.verdict == DISAGREES and v.tensor == "slot/w/accum:0" and "worst at [5, 0]" in v.detail, v


def test_a_result_beyond_float32_is_its_infinity():
    with np.errstate(over="ignore"):
        c = case("ApplyGradientDescent", shape=(2,), var=np.array([3e38, 1], F), grad=np.array([-1e38, 1], F), lr=1.0)
    assert np.isinf(c["after"]["var/w:0"][0])
    assert audited(c).verdict == AGREES


def test_a_variable_no_rule_covers_takes_its_recorded_re_execution():
    from tracekit.store.audit import with_reexecution
    from tracekit.store.audit_result import AuditResult, StepAudit, VariableAudit

    rule = AuditResult.of_steps([StepAudit(0, (
        VariableAudit("a:0", "assign", "not auditable", "a hand-written update"),
        VariableAudit("b:0", "ApplyAdam", "agrees", "0.4 ulps", 0.4),
        VariableAudit("c:0", "ApplyAdam", "agrees", "0.4 ulps", 0.4),
        VariableAudit("d:0", "assign", "not auditable", "a hand-written update")))])
    rerun = AuditResult.of_steps([StepAudit(0, (
        VariableAudit("a:0", "assign", "agrees", "re-executed: var 0 ulps of scale (limit 16)", 0.0, by="re-execution"),
        VariableAudit("b:0", "ApplyAdam", "agrees", "re-executed: var 0", 0.0, by="re-execution"),
        VariableAudit("c:0", "ApplyAdam", "disagrees", "re-executing its update gives var/c:0 ...", 900.0,
                      by="re-execution")))])
    joined = {v.var: v for v in with_reexecution(rule, rerun).variables}
    assert (joined["a:0"].verdict, joined["a:0"].by) == ("agrees", "re-execution")
    assert "re-executed when recorded (step 0)" in joined["a:0"].detail
    assert (joined["b:0"].verdict, joined["b:0"].by) == ("agrees", "rule and re-execution")
    # the two checks must agree: either one's disagreement is the verdict
    assert joined["c:0"].verdict == "disagrees" and joined["c:0"].detail.startswith("its kernel rule agrees, but")
    assert joined["d:0"].verdict == "not auditable" and "not re-executed when it was recorded" in joined["d:0"].detail
    # a golden recorded before updates were re-executed says so
    older = {v.var: v for v in with_reexecution(rule, None).variables}
    assert older["a:0"].verdict == "not auditable" and "record it again" in older["a:0"].detail
    again = AuditResult.of(with_reexecution(rule, rerun).to_meta())
    assert [v.by for v in again.variables] == ["re-execution", "rule and re-execution", "re-execution", "rule"]
