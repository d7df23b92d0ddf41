"""TF 1.15's optimizer update kernels as float64 rules, each beside a bound on how far the
kernel's own arithmetic can be from it: the update audit (store/audit.py) recomputes a
recorded step's update with them.

Each rule is the CPU functor of tensorflow/core/kernels/training_ops.cc (TF 1.15), or the
scatter and assign ops a TF1 optimizer writes instead (record/paths.py), in the kernel's order
of operations over `Bounded` values (bounded.py): a float64 value and a first-order bound on the
error the kernel's arithmetic in the tensor's dtype accumulates computing it. A faithful kernel
stays within half its bound; the audit allows LIMIT_ULPS times it. Numpy only, Python 3.7 syntax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .bounded import Bounded, maximum, select, where

Tensors = Dict[str, Bounded]


# The rules: t holds "var", "grad", "lr", the slots, hyperparameters and state by the op's
# argument names; each returns the variable and the slots after the op.

def gradient_descent(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    return {"var": t["var"] - t["grad"] * t["lr"]}


def proximal_gradient_descent(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    lr, l1, l2 = t["lr"], t["l1"], t["l2"]
    prox = t["var"] - t["grad"] * lr
    if float(l1.val) > 0:
        var = prox.sign() * maximum(prox.abs() - lr * l1, 0.0) / (1.0 + l2 * lr)
    else:
        var = prox / (1.0 + l2 * lr)
    return {"var": var}


def momentum(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    g, lr, mu = t["grad"], t["lr"], t["momentum"]
    accum = t["accum"] * mu + g
    if attrs["use_nesterov"]:
        var = t["var"] - (g * lr + accum * mu * lr)
    else:
        var = t["var"] - accum * lr
    return {"var": var, "accum": accum}


def keras_momentum(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    g, lr, mu = t["grad"], t["lr"], t["momentum"]
    accum = t["accum"] * mu - g * lr
    var = t["var"] + (accum * mu - g * lr) if attrs["use_nesterov"] else t["var"] + accum
    return {"var": var, "accum": accum}


def adam(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    g, b1, b2, eps = t["grad"], t["beta1"], t["beta2"], t["epsilon"]
    alpha = t["lr"] * (1.0 - t["beta2_power"]).sqrt() / (1.0 - t["beta1_power"])
    m = t["m"] + (g - t["m"]) * (1.0 - b1)
    v = t["v"] + (g.square() - t["v"]) * (1.0 - b2)
    if attrs["use_nesterov"]:
        var = t["var"] - ((g * (1.0 - b1) + b1 * m) * alpha) / (v.sqrt() + eps)
    else:
        var = t["var"] - (m * alpha) / (v.sqrt() + eps)
    return {"var": var, "m": m, "v": v}


def adam_amsgrad(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    g, b1, b2 = t["grad"], t["beta1"], t["beta2"]
    alpha = t["lr"] * (1.0 - t["beta2_power"]).sqrt() / (1.0 - t["beta1_power"])
    m = t["m"] + (g - t["m"]) * (1.0 - b1)
    v = t["v"] + (g.square() - t["v"]) * (1.0 - b2)
    vhat = maximum(t["vhat"], v)
    return {"var": t["var"] - (m * alpha) / (vhat.sqrt() + t["epsilon"]), "m": m, "v": v, "vhat": vhat}


def adamax(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    g = t["grad"]
    m = t["m"] + (g - t["m"]) * (1.0 - t["beta1"])
    v = maximum(t["beta2"] * t["v"], g.abs())
    var = t["var"] - t["lr"] / (1.0 - t["beta1_power"]) * (m / (v + t["epsilon"]))
    return {"var": var, "m": m, "v": v}


def rmsprop(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    g, lr, rho, eps = t["grad"], t["lr"], t["rho"], t["epsilon"]
    if attrs.get(SPARSE):  # the sparse kernel's own arithmetic
        ms = t["ms"] * rho + g.square() * (1.0 - rho)
        mom = t["mom"] * t["momentum"] + (ms + eps).rsqrt() * lr * g
    else:
        ms = t["ms"] + (g.square() - t["ms"]) * (1.0 - rho)
        mom = t["mom"] * t["momentum"] + (g * lr) / (ms + eps).sqrt()
    return {"var": t["var"] - mom, "ms": ms, "mom": mom}


def centered_rmsprop(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    g, lr, rho, eps = t["grad"], t["lr"], t["rho"], t["epsilon"]
    if attrs.get(SPARSE):
        ms = t["ms"] * rho + g.square() * (1.0 - rho)
        mg = t["mg"] * rho + g * (1.0 - rho)
        mom = t["mom"] * t["momentum"] + (ms + eps - mg.square()).rsqrt() * lr * g
    else:
        ms = t["ms"] + (g.square() - t["ms"]) * (1.0 - rho)
        mg = t["mg"] + (g - t["mg"]) * (1.0 - rho)
        mom = t["mom"] * t["momentum"] + (g * lr) / ((ms - mg.square()) + eps).sqrt()
    return {"var": t["var"] - mom, "mg": mg, "ms": ms, "mom": mom}


def adagrad(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    accum = t["accum"] + t["grad"].square() if attrs["update_slots"] else t["accum"]
    return {"var": t["var"] - t["grad"] * t["lr"] * accum.rsqrt(), "accum": accum}


def adagrad_v2(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    accum = t["accum"] + t["grad"].square() if attrs["update_slots"] else t["accum"]
    return {"var": t["var"] - t["grad"] * t["lr"] / (accum.sqrt() + t["epsilon"]), "accum": accum}


def proximal_adagrad(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    l1, l2 = t["l1"], t["l2"]
    accum = t["accum"] + t["grad"].square()
    rate = t["lr"] * accum.rsqrt()
    prox = t["var"] - t["grad"] * rate
    if float(l1.val) > 0:
        var = prox.sign() * maximum(prox.abs() - rate * l1, 0.0) / (1.0 + l2 * rate)
    else:
        var = prox / (1.0 + l2 * rate)
    return {"var": var, "accum": accum}


def adadelta(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    g, rho, eps = t["grad"], t["rho"], t["epsilon"]
    accum = t["accum"] * rho + g.square() * (1.0 - rho)
    update = (t["accum_update"] + eps).sqrt() * (accum + eps).rsqrt() * g
    accum_update = t["accum_update"] * rho + update.square() * (1.0 - rho)
    return {"var": t["var"] - update * t["lr"], "accum": accum, "accum_update": accum_update}


def ftrl(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    """ApplyFtrl, and ApplyFtrlV2 when t holds l2_shrinkage."""
    g, lr, l1, l2, var, accum = t["grad"], t["lr"], t["l1"], t["l2"], t["var"], t["accum"]
    shrunk = g + 2.0 * t["l2_shrinkage"] * var if "l2_shrinkage" in t else g
    new_accum = accum + g.square()
    power = float(t["lr_power"].val)
    if power == -0.5:
        linear = t["linear"] + (shrunk - (new_accum.sqrt() - accum.sqrt()) / lr * var)
        y = new_accum.sqrt() / lr + 2.0 * l2
    else:
        linear = t["linear"] + (shrunk - (new_accum.pow(-t["lr_power"]) - accum.pow(-t["lr_power"])) / lr * var)
        y = new_accum.pow(-t["lr_power"]) / lr + 2.0 * l2
    x = l1 * linear.sign() - linear
    return {"var": select(linear.abs(), l1, x / y, 0.0), "accum": accum + g.square(), "linear": linear}


def add_sign(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    g, beta = t["grad"], t["beta"]
    m = t["m"] * beta + g * (1.0 - beta)
    sign_gm = g.sign() * m.sign()
    return {"var": t["var"] - t["lr"] * (t["alpha"] + t["sign_decay"] * sign_gm) * g, "m": m}


def power_sign(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    g, beta = t["grad"], t["beta"]
    m = t["m"] * beta + g * (1.0 - beta)
    scale = (t["logbase"] * t["sign_decay"] * (g.sign() * m.sign())).exp()
    return {"var": t["var"] - t["lr"] * scale * g, "m": m}


def adagrad_da(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    """ApplyAdagradDA; the sparse kernel computes the same in another order (in float on rows of
    more than one element, in double on single elements), which `attrs` say."""
    g, lr, l1, l2, step = t["grad"], t["lr"], t["l1"], t["l2"], t["global_step"]
    ga = t["gradient_accumulator"] + g
    gga = t["gradient_squared_accumulator"] + g.square()
    if attrs.get(SPARSE) and attrs.get(INNER, 1) > 1:
        rate = step * lr
        if float(l1.val) > 0:
            var = -1.0 * ga.sign() * maximum(ga.abs() / step - l1, 0.0) / (l2 + gga.sqrt() / rate)
        else:
            var = -1.0 * (ga / step) / (l2 + gga.sqrt() / rate)
    elif attrs.get(SPARSE):
        if float(l1.val) > 0:
            var = (-ga).sign() * lr * maximum(ga.abs() - step * l1, 0.0) / (step * l2 * lr + gga.sqrt())
        else:
            var = (-ga * lr) / (step * l2 * lr + gga.sqrt())
    elif float(l1.val) > 0:
        var = lr * -1.0 * ga.sign() * maximum(ga.abs() - step * l1, 0.0) / (l2 * (step * lr) + gga.sqrt())
    else:
        var = lr * ga * -1.0 / (l2 * (step * lr) + gga.sqrt())
    return {"var": var, "gradient_accumulator": ga, "gradient_squared_accumulator": gga}


# Updates TF1 optimizers write as scatter and assign ops (record/paths.py). A WHOLE rule gets the
# gradient's rows summed into the variable's shape (zero elsewhere) and t["rows"], where a row
# was given one; the others are SEQUENTIAL sparse rules on the rows alone.

def scatter_adam(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    """AdamOptimizer._apply_sparse: m and v decay on every row, the rows' gradient added after;
    the variable moves on every row."""
    g, b1, b2 = t["grad"], t["beta1"], t["beta2"]
    alpha = t["lr"] * (1.0 - t["beta2_power"]).sqrt() / (1.0 - t["beta1_power"])
    m = where(t["rows"], t["m"] * b1 + g * (1.0 - b1), t["m"] * b1)
    v = where(t["rows"], t["v"] * b2 + g.square() * (1.0 - b2), t["v"] * b2)
    return {"var": t["var"] - (alpha * m) / (v.sqrt() + t["epsilon"]), "m": m, "v": v}


def lazy_adam(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    """contrib's LazyAdamOptimizer._apply_sparse, on the rows given only."""
    g, b1, b2 = t["grad"], t["beta1"], t["beta2"]
    alpha = t["lr"] * (1.0 - t["beta2_power"]).sqrt() / (1.0 - t["beta1_power"])
    m = b1 * t["m"] + (1.0 - b1) * g
    v = b2 * t["v"] + (1.0 - b2) * g.square()
    return {"var": t["var"] - (alpha * m) / (v.sqrt() + t["epsilon"]), "m": m, "v": v}


def _signed_m(t: Tensors) -> Tuple[Bounded, Bounded]:
    """contrib's AddSign/PowerSign on rows: m moves on every row (the rows' gradient made dense),
    the sign agreement of the rows given."""
    m = t["m"] * t["beta"] + t["grad"] * (1.0 - t["beta"])
    return m, m.sign() * t["grad"].sign()


def scatter_add_sign(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    m, agree = _signed_m(t)
    step = t["lr"] * (t["alpha"] + t["sign_decay"] * agree) * t["grad"]
    return {"var": where(t["rows"], t["var"] - step, t["var"]), "m": m}


def scatter_power_sign(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    m, agree = _signed_m(t)
    step = t["lr"] * (t["logbase"] * t["sign_decay"] * agree * E_LOG).exp() * t["grad"]
    return {"var": where(t["rows"], t["var"] - step, t["var"]), "m": m}


def lars_momentum(t: Tensors, attrs: Mapping[str, Any]) -> Tensors:
    """contrib's LARSOptimizer: ApplyMomentum at rate 1 on the gradient plus weight decay, scaled by
    the rate times the trust ratio eeta |w| / (|g| + wd |w| + epsilon) (1 where a norm is 0)."""
    var, g, wd = t["var"], t["grad"], t["weight_decay"]
    rate = t["lr"]
    if float(t["scaled"].val):
        w_norm, g_norm = var.norm(), g.norm()
        trust = t["eeta"] * w_norm / (g_norm + wd * w_norm + t["epsilon"])
        trust = select(w_norm, 0.0, select(g_norm, 0.0, trust, 1.0), 1.0)
        rate = rate * trust
        g = g + wd * var
    step = g * rate
    accum = t["accum"] * t["momentum"] + step
    if attrs["use_nesterov"]:
        return {"var": var - (step + accum * t["momentum"]), "accum": accum}
    return {"var": var - accum, "accum": accum}


SPARSE = "_sparse"  # in the attrs a rule gets: the sparse kernel's form is asked for
INNER = "_inner"  # ... and the elements of a row (the kernels take another path for one)
DECAY = "_decay"  # ... and decoupled weight decay applied first (`var -= decay * var`)
SEQUENTIAL, PARALLEL = "sequential", "parallel"  # how a sparse kernel walks its rows
WHOLE = "whole"  # ... or a scatter path's rule, given the rows summed into the variable's shape
E_LOG = float(np.log(np.float32(np.e)))  # PowerSign's scatter path raises float32 e to a power


@dataclass(frozen=True)
class Rule:
    """An update op's rule and what it reads, by the op-def's argument names."""

    apply: Callable[[Tensors, Mapping[str, Any]], Tensors]
    slots: Tuple[str, ...] = ()  # the slot variables it updates
    hyper: Tuple[str, ...] = ()  # its scalar inputs, which the golden keeps when the graph fixes them
    state: Tuple[str, ...] = ()  # optimizer state it reads and leaves (Adam's beta powers)
    attrs: Tuple[str, ...] = ()  # bool attributes that change its arithmetic
    # how the Sparse* kernel walks the rows (None: there is no sparse form): SEQUENTIAL, one after
    # another (a duplicate index is updated twice, in order); PARALLEL, in shards (duplicates race);
    # WHOLE, over the whole variable with the rows summed into its shape
    sparse: Optional[str] = None
    scatter: bool = False  # a path of scatter and assign ops, taken for sparse gradients only (no Sparse* prefix)
    reduces: bool = False  # it reads norms of whole tensors: recomputed in one part, whatever its size


RULES: Dict[str, Rule] = {
    "ApplyGradientDescent": Rule(gradient_descent),
    "ApplyProximalGradientDescent": Rule(proximal_gradient_descent, hyper=("l1", "l2"), sparse=SEQUENTIAL),
    "ApplyMomentum": Rule(momentum, ("accum",), ("momentum",), attrs=("use_nesterov",), sparse=SEQUENTIAL),
    "ApplyKerasMomentum": Rule(keras_momentum, ("accum",), ("momentum",), attrs=("use_nesterov",),
                               sparse=SEQUENTIAL),
    "ApplyAdam": Rule(adam, ("m", "v"), ("beta1", "beta2", "epsilon"), ("beta1_power", "beta2_power"),
                      ("use_nesterov",)),
    "ApplyAdamWithAmsgrad": Rule(adam_amsgrad, ("m", "v", "vhat"), ("beta1", "beta2", "epsilon"),
                                 ("beta1_power", "beta2_power")),
    "ApplyAdaMax": Rule(adamax, ("m", "v"), ("beta1", "beta2", "epsilon"), ("beta1_power",)),
    "ApplyRMSProp": Rule(rmsprop, ("ms", "mom"), ("rho", "momentum", "epsilon"), sparse=SEQUENTIAL),
    "ApplyCenteredRMSProp": Rule(centered_rmsprop, ("mg", "ms", "mom"), ("rho", "momentum", "epsilon"),
                                 sparse=SEQUENTIAL),
    "ApplyAdagrad": Rule(adagrad, ("accum",), attrs=("update_slots",), sparse=PARALLEL),
    "ApplyAdagradV2": Rule(adagrad_v2, ("accum",), ("epsilon",), attrs=("update_slots",), sparse=PARALLEL),
    "ApplyProximalAdagrad": Rule(proximal_adagrad, ("accum",), ("l1", "l2"), sparse=SEQUENTIAL),
    "ApplyAdadelta": Rule(adadelta, ("accum", "accum_update"), ("rho", "epsilon"), sparse=SEQUENTIAL),
    "ApplyFtrl": Rule(ftrl, ("accum", "linear"), ("l1", "l2", "lr_power"), sparse=SEQUENTIAL),
    "ApplyFtrlV2": Rule(ftrl, ("accum", "linear"), ("l1", "l2", "l2_shrinkage", "lr_power"), sparse=SEQUENTIAL),
    "ApplyAddSign": Rule(add_sign, ("m",), ("alpha", "sign_decay", "beta")),
    "ApplyPowerSign": Rule(power_sign, ("m",), ("logbase", "sign_decay", "beta")),
    "ApplyAdagradDA": Rule(adagrad_da, ("gradient_accumulator", "gradient_squared_accumulator"), ("l1", "l2"),
                           ("global_step",), sparse=SEQUENTIAL),
    "ScatterAdam": Rule(scatter_adam, ("m", "v"), ("beta1", "beta2", "epsilon"), ("beta1_power", "beta2_power"),
                        sparse=WHOLE, scatter=True),
    "ScatterLazyAdam": Rule(lazy_adam, ("m", "v"), ("beta1", "beta2", "epsilon"), ("beta1_power", "beta2_power"),
                            sparse=SEQUENTIAL, scatter=True),
    "ScatterGradientDescent": Rule(gradient_descent, sparse=SEQUENTIAL, scatter=True),
    "ScatterAddSign": Rule(scatter_add_sign, ("m",), ("alpha", "sign_decay", "beta"), sparse=WHOLE, scatter=True),
    "ScatterPowerSign": Rule(scatter_power_sign, ("m",), ("logbase", "sign_decay", "beta"), sparse=WHOLE,
                             scatter=True),
    "LARSMomentum": Rule(lars_momentum, ("accum",), ("momentum", "weight_decay", "eeta", "epsilon", "scaled"),
                         attrs=("use_nesterov",), reduces=True),
}

_OP = re.compile(r"^(Resource)?(Sparse)?(Apply\w+|Scatter\w+|LARSMomentum)$")


def rule_of(op_type: str) -> Tuple[Optional[Rule], bool]:
    """(the rule of an update's type, whether its gradient is sparse: a Sparse* op or a scatter
    path); (None, ...) for an update without one (or a Sparse* form the kernels lack)."""
    found = _OP.match(op_type)
    if not found:
        return None, False
    rule, sparse = RULES.get(found.group(3)), bool(found.group(2))
    if rule is not None and rule.scatter:
        return (None if sparse else rule), True
    return (rule if rule is not None and (not sparse or rule.sparse) else None), sparse


def recompute(rule: Rule, before: Mapping[str, np.ndarray], scalars: Mapping[str, float], grad: np.ndarray,
              attrs: Mapping[str, Any], ulp: float, indices: Optional[np.ndarray] = None,
              rows: Optional[np.ndarray] = None) -> Tensors:
    """The variable and slots after the op, from `before` ("var" and the slot arguments), the
    gradient, the scalar inputs ("lr", hyperparameters, state) and the attributes. With
    `indices` (a Sparse* op): the rows they name, one occurrence of each at a time and in
    order, as the SEQUENTIAL kernels do (a PARALLEL one's caller refuses duplicates); the other
    rows are left as they were. With `rows` (a WHOLE rule): the gradient is dense, and `rows`
    marks the elements of the rows it was given. attrs[DECAY]: the variable (its rows given,
    for a sparse gradient) is first decayed by that rate."""
    with np.errstate(all="ignore"):  # inf and nan are compared as such
        scalar = {name: Bounded(value, 0.0, ulp) for name, value in scalars.items()}
        decay = attrs.get(DECAY)
        if indices is None:
            t = {name: Bounded(value, 0.0, ulp) for name, value in before.items()}
            if decay is not None:
                decayed = t["var"] - Bounded(decay, 0.0, ulp) * t["var"]
                t["var"] = decayed if rows is None else where(rows, decayed, t["var"])
            t.update(scalar, grad=Bounded(grad, 0.0, ulp))
            if rows is not None:
                t["rows"] = rows
            return rule.apply(t, attrs)
        whole = {name: Bounded(np.array(value, dtype=np.float64), np.zeros(np.shape(value)), ulp)
                 for name, value in before.items()}
        sparse_attrs = dict(attrs)
        sparse_attrs[SPARSE] = True
        sparse_attrs[INNER] = int(np.prod(np.shape(before["var"])[1:]))
        if decay is not None:  # once per row named (the caller refuses repeated indices with a decay)
            at = np.unique(indices)
            var = Bounded(whole["var"].val[at], whole["var"].err[at], ulp)
            var = var - Bounded(decay, 0.0, ulp) * var
            whole["var"].val[at], whole["var"].err[at] = var.val, var.err
        for rows in occurrences(indices):
            at = indices[rows]
            t = {name: Bounded(b.val[at], b.err[at], ulp) for name, b in whole.items()}
            t.update(scalar, grad=Bounded(grad[rows], 0.0, ulp))
            for name, after in rule.apply(t, sparse_attrs).items():
                whole[name].val[at] = after.val
                whole[name].err[at] = after.err
        return whole


def occurrences(indices: np.ndarray) -> List[np.ndarray]:
    """Positions into `indices`, in rounds: the first occurrence of every index, then the second
    of those that repeat, ...; in each round every index once, in their order."""
    order = np.argsort(indices, kind="stable")
    ranked = indices[order]
    starts = np.r_[0, np.flatnonzero(ranked[1:] != ranked[:-1]) + 1] if len(ranked) else np.zeros(0, np.int64)
    rank = np.arange(len(ranked)) - np.repeat(starts, np.diff(np.r_[starts, len(ranked)]))
    occurrence = np.empty(len(indices), dtype=np.int64)
    occurrence[order] = rank
    return [np.flatnonzero(occurrence == r) for r in range(int(occurrence.max()) + 1 if len(indices) else 0)]
