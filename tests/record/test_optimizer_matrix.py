"""Every TF1 optimizer's every update path, recorded and held to a truth computed without
tracekit: the generated matrix of optimizer x variable kind (ref, resource) x gradient kind
(dense; IndexedSlices from tf.gather, embedding_lookup, a partitioned embedding_lookup and
embedding_lookup_sparse). TF1 writes some of these updates as Apply* ops and others as scatter
and assign ops (Adam and GradientDescent on an embedding, contrib's LazyAdam, AddSign and
PowerSign on rows) or beside one (contrib's decoupled weight decay), or transforms the gradient
first (contrib's LARS). In every cell the golden must hold, at every step:

- each variable's gradient, equal to numpy's gradient of the loss at the state the step started from;
- its slots as slots of that variable, and one learning rate, the optimizer's;
- the variable and its slots after the step, equal to a float64 numpy recomputation of the
  optimizer's documented rule (on the rows given, or on every row, as TF1's path does);
- its self-check verified, and the audit of every variable agreeing, by its kernel's rule and by
  re-executing its update.

The model: a table (10 x 4, rows 8 and 9 never looked up, ids repeated) and a 1-D bias read by
the same ids, a dense weight, loss = mean(((table[ids] * x) @ w + bias[ids] - 1)^2). The cells
TF1 itself cannot build (contrib's AddSign/PowerSign on a resource variable's rows) are asserted
to fail in TF1, with its own error."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit

STEPS = 3
ROWS, DIM, BATCH = 10, 4, 6
LR = {"gd": 0.1, "momentum": 0.1, "nesterov": 0.1, "adam": 0.01, "adagrad": 0.1, "adagrad_da": 0.1, "adadelta": 1.0,
      "rmsprop": 0.01, "rmsprop_centered": 0.01, "ftrl": 0.1, "ftrl_v2": 0.1, "proximal_gd": 0.1,
      "proximal_adagrad": 0.1, "lazy_adam": 0.01, "adamw": 0.01, "momentumw": 0.1, "addsign": 0.1, "powersign": 0.1,
      "lars": 0.1}
CONTRIB = ("lazy_adam", "adamw", "momentumw", "addsign", "powersign", "lars")
L1, L2, SHRINK, MU, WD = 0.01, 0.01, 0.01, 0.9, 0.01
VARIABLES = ("ref", "resource")
GRADIENTS = ("dense", "gather", "lookup", "partitioned", "lookup_sparse")
# The updates of a sparse gradient that touch the rows given only (TF1's Sparse* kernels, LazyAdam);
# the others move every row as if the rest of the gradient were zero.
ROWS_ONLY = frozenset(["momentum", "nesterov", "adagrad", "adagrad_da", "adadelta", "rmsprop", "rmsprop_centered",
                       "ftrl", "ftrl_v2", "proximal_gd", "proximal_adagrad", "lazy_adam", "momentumw", "lars"])


def optimizer(tf, name, step):
    t = tf.compat.v1.train
    lr = LR[name]
    made = {
        "gd": lambda: t.GradientDescentOptimizer(lr),
        "momentum": lambda: t.MomentumOptimizer(lr, MU),
        "nesterov": lambda: t.MomentumOptimizer(lr, MU, use_nesterov=True),
        "adam": lambda: t.AdamOptimizer(lr),
        "adagrad": lambda: t.AdagradOptimizer(lr),
        "adagrad_da": lambda: t.AdagradDAOptimizer(lr, step, l1_regularization_strength=L1,
                                                   l2_regularization_strength=L2),
        "adadelta": lambda: t.AdadeltaOptimizer(lr),
        "rmsprop": lambda: t.RMSPropOptimizer(lr),
        "rmsprop_centered": lambda: t.RMSPropOptimizer(lr, momentum=0.5, centered=True),
        "ftrl": lambda: t.FtrlOptimizer(lr, l1_regularization_strength=L1, l2_regularization_strength=L2),
        "ftrl_v2": lambda: t.FtrlOptimizer(lr, l1_regularization_strength=L1, l2_regularization_strength=L2,
                                           l2_shrinkage_regularization_strength=SHRINK),
        "proximal_gd": lambda: t.ProximalGradientDescentOptimizer(lr, l1_regularization_strength=L1,
                                                                  l2_regularization_strength=L2),
        "proximal_adagrad": lambda: t.ProximalAdagradOptimizer(lr, l1_regularization_strength=L1,
                                                               l2_regularization_strength=L2),
    }
    if name in made:
        return made[name]()
    opt = tf.contrib.opt
    return {"lazy_adam": lambda: opt.LazyAdamOptimizer(lr), "adamw": lambda: opt.AdamWOptimizer(WD, learning_rate=lr),
            "momentumw": lambda: opt.MomentumWOptimizer(WD, learning_rate=lr, momentum=MU),
            "addsign": lambda: opt.AddSignOptimizer(lr), "powersign": lambda: opt.PowerSignOptimizer(lr),
            "lars": lambda: opt.LARSOptimizer(lr, momentum=MU, weight_decay=WD)}[name]()


def build(tf, name, variables, gradients):
    """The cell's graph in the default graph: (feeds, loss, train op, optimizer, trainable variables)."""
    v1 = tf.compat.v1
    ids = v1.placeholder(tf.int64, [BATCH], name="ids")
    x = v1.placeholder(tf.float32, [BATCH, DIM], name="x")
    parts = v1.fixed_size_partitioner(2) if gradients == "partitioned" else None
    with v1.variable_scope("m", use_resource=variables == "resource"):
        table = v1.get_variable("table", [ROWS, DIM], initializer=v1.random_normal_initializer(seed=1),
                                partitioner=parts)
        bias = v1.get_variable("bias", [ROWS], initializer=v1.random_normal_initializer(seed=2))
        w = v1.get_variable("w", [DIM, 1], initializer=v1.random_normal_initializer(seed=3))
    if gradients == "dense":
        hot = tf.one_hot(ids, ROWS)
        rows, b = tf.matmul(hot, table), tf.matmul(hot, tf.reshape(bias, [ROWS, 1]))[:, 0]
    else:
        b = tf.gather(bias, ids)
        if gradients == "gather":
            rows = tf.gather(table, ids)
        elif gradients in ("lookup", "partitioned"):
            rows = v1.nn.embedding_lookup(table, ids, partition_strategy="div")
        else:
            sparse = tf.SparseTensor(indices=[[i, 0] for i in range(BATCH)], values=ids, dense_shape=[BATCH, 1])
            rows = v1.nn.embedding_lookup_sparse(table, sparse, None, combiner="sum")
    loss = tf.reduce_mean(tf.square(tf.matmul(rows * x, w)[:, 0] + b - 1.0))
    step = v1.train.get_or_create_global_step()
    opt = optimizer(tf, name, step)
    if name in ("adamw", "momentumw"):  # their decay is otherwise unordered with the forward pass (a TF1 race)
        pairs = opt.compute_gradients(loss)
        ready = [loss] + [getattr(g, "values", g) for g, _ in pairs]
        with tf.control_dependencies(ready):
            train = opt.apply_gradients(pairs, global_step=step)
    else:
        train = opt.minimize(loss, global_step=step)
    return (ids, x), loss, train, opt, v1.trainable_variables()


def feeds(k):
    rng = np.random.RandomState(k)
    ids = rng.randint(0, 8, BATCH)
    ids[-1] = ids[0]  # a repeated id: rows summed by index
    return ids, rng.randn(BATCH, DIM).astype(np.float32)


# ---- the truth, in numpy -----------------------------------------------------------------------

def numpy_gradients(state, names, ids, x):
    """numpy's gradient of the loss, at `state` (variable name -> value), of each variable."""
    table = np.concatenate([state[n] for n in names["table"]]).astype(np.float64)
    bias, w = state[names["bias"]].astype(np.float64), state[names["w"]].astype(np.float64)
    u = table[ids] * x
    dz = 2.0 * (u @ w[:, 0] + bias[ids] - 1.0) / BATCH
    dtable = np.zeros_like(table)
    np.add.at(dtable, ids, dz[:, None] * w[:, 0][None, :] * x)
    dbias = np.zeros_like(bias)
    np.add.at(dbias, ids, dz)
    out = {names["w"]: (u.T @ dz)[:, None], names["bias"]: dbias}
    start = 0
    for n in names["table"]:
        rows = state[n].shape[0]
        out[n] = dtable[start:start + rows]
        start += rows
    return out


def rule(name, var, s, g, t, counter):
    """The optimizer's documented update in float64: (variable, slots by TF1 slot name) after it.
    `t`: the step's number from 1 (Adam's bias correction); `counter`: AdagradDA's global step."""
    lr, s = LR[name], dict(s)
    sign = np.sign
    if name in ("gd",):
        return var - lr * g, s
    if name in ("momentum", "nesterov", "momentumw"):
        s["momentum"] = MU * s["momentum"] + g
        return var - lr * (g + MU * s["momentum"] if name == "nesterov" else s["momentum"]), s
    if name in ("adam", "lazy_adam", "adamw"):
        s["m"] = 0.9 * s["m"] + 0.1 * g
        s["v"] = 0.999 * s["v"] + 0.001 * g * g
        return var - lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * s["m"] / (np.sqrt(s["v"]) + 1e-8), s
    if name == "adagrad":
        s["accumulator"] = s["accumulator"] + g * g
        return var - lr * g / np.sqrt(s["accumulator"]), s
    if name == "adagrad_da":
        s["gradient_accumulator"] = ga = s["gradient_accumulator"] + g
        s["gradient_squared_accumulator"] = gga = s["gradient_squared_accumulator"] + g * g
        return -lr * sign(ga) * np.maximum(np.abs(ga) - counter * L1, 0) / (counter * L2 * lr + np.sqrt(gga)), s
    if name == "adadelta":
        s["accum"] = 0.95 * s["accum"] + 0.05 * g * g
        step = np.sqrt(s["accum_update"] + 1e-8) / np.sqrt(s["accum"] + 1e-8) * g
        s["accum_update"] = 0.95 * s["accum_update"] + 0.05 * step * step
        return var - lr * step, s
    if name in ("rmsprop", "rmsprop_centered"):
        s["rms"] = 0.9 * s["rms"] + 0.1 * g * g
        denominator = s["rms"] + 1e-10
        if name == "rmsprop_centered":
            s["mg"] = 0.9 * s["mg"] + 0.1 * g
            denominator = denominator - s["mg"] ** 2
        s["momentum"] = (0.5 if name == "rmsprop_centered" else 0.0) * s["momentum"] + lr * g / np.sqrt(denominator)
        return var - s["momentum"], s
    if name in ("ftrl", "ftrl_v2"):
        accum = s["accum"] + g * g
        shrunk = g + 2 * SHRINK * var if name == "ftrl_v2" else g
        s["linear"] = s["linear"] + shrunk - (np.sqrt(accum) - np.sqrt(s["accum"])) / lr * var
        s["accum"] = accum
        quadratic = np.sqrt(accum) / lr + 2 * L2
        return np.where(np.abs(s["linear"]) > L1, (sign(s["linear"]) * L1 - s["linear"]) / quadratic, 0.0), s
    if name in ("proximal_gd", "proximal_adagrad"):
        rate = lr
        if name == "proximal_adagrad":
            s["accumulator"] = s["accumulator"] + g * g
            rate = lr / np.sqrt(s["accumulator"])
        prox = var - rate * g
        return sign(prox) * np.maximum(np.abs(prox) - rate * L1, 0) / (1 + rate * L2), s
    if name in ("addsign", "powersign"):
        s["m"] = 0.9 * s["m"] + 0.1 * g
        agree = sign(g) * sign(s["m"])
        return var - lr * ((1.0 + agree) if name == "addsign" else np.exp(agree)) * g, s
    if name == "lars":
        w_norm, g_norm = np.linalg.norm(var), np.linalg.norm(g)
        trust = 0.001 * w_norm / (g_norm + WD * w_norm) if w_norm > 0 and g_norm > 0 else 1.0
        s["momentum"] = MU * s["momentum"] + lr * trust * (g + WD * var)
        return var - s["momentum"], s
    raise KeyError(name)


def expected(name, sparse, var, slots, g, rows, t, counter):
    """The variable and slots after the step: on the rows given only where TF1's path does so."""
    var = var.astype(np.float64)
    slots = {k: v.astype(np.float64) for k, v in slots.items()}
    touched = rows if sparse else np.ones(var.shape[0], dtype=bool)
    if name in ("adamw", "momentumw"):  # decoupled weight decay first, on the rows given for a sparse gradient
        var = np.where(_rows(touched, var), var - WD * var, var)
    if name == "lars" and sparse:  # LARS falls back to plain momentum for a sparse gradient
        s = {"momentum": MU * slots["momentum"] + g}
        new, s = var - LR[name] * s["momentum"], s
    else:
        new, s = rule(name, var, slots, g, t, counter)
    if sparse and name in ROWS_ONLY:
        new = np.where(_rows(touched, var), new, var)
        s = {k: np.where(_rows(touched, v), v, slots[k]) for k, v in s.items()}
    return new, s


def _rows(mask, like):
    return mask.reshape((-1,) + (1,) * (like.ndim - 1))


def dense_gradient(step, var, shape):
    """The gradient a step recorded for `var`, in the variable's shape (Step.gradient: kept as the
    rows its update consumed, added up by index), and the rows it names."""
    if "grad/" + var in step:
        return step.gradient(var).astype(np.float64), None
    rows = np.zeros(shape[0], dtype=bool)
    rows[step["grad/%s/indices" % var]] = True
    return step.gradient(var, shape).astype(np.float64), rows


# ---- the matrix ------------------------------------------------------------------------------

def cells():
    for name in LR:
        for variables in VARIABLES:
            for gradients in GRADIENTS:
                # tf.contrib is TF 1.15's; TF 2's compat.v1 runs the dense and gather columns (the same
                # classes; the recorder's world is TF 1.15, which runs them all)
                marks = [pytest.mark.tf1] if name in CONTRIB or gradients not in ("dense", "gather") else []
                if name in ("addsign", "powersign") and variables == "resource" and gradients != "dense":
                    continue  # TF1 cannot build these: test_what_tf1_itself_refuses
                yield pytest.param(name, variables, gradients, marks=marks, id="-".join((name, variables, gradients)))


@pytest.mark.parametrize("name,variables,gradients", list(cells()))
def test_every_update_path_records_true(tf, tmp_path, name, variables, gradients):
    path = str(tmp_path / "cell.h5")
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        with tracekit.tf1.record(path) as rec:
            (ids, x), loss, train, opt, trainable = build(tf, name, variables, gradients)
            slot_names = {v.name: {s: opt.get_slot(v, s).name for s in opt.get_slot_names()
                                   if opt.get_slot(v, s) is not None} for v in trainable}
            with v1.Session() as sess:
                rec.session(sess)
                sess.run(v1.global_variables_initializer())
                for k in range(STEPS):
                    fed_ids, fed_x = feeds(k)
                    sess.run([loss, train], {ids: fed_ids, x: fed_x})
    variables_ = [v.name for v in trainable]
    names = {"table": [v for v in variables_ if "/table" in v], "bias": "m/bias:0", "w": "m/w:0"}
    sparse = {v: gradients != "dense" and v != "m/w:0" for v in variables_}
    with tracekit.open(path) as trace:
        meta = trace.meta
        assert [c["verdict"] for c in meta["self_check"]] == ["verified"], meta["self_check"]
        assert not meta["warnings"], meta["warnings"]
        for var, slots in slot_names.items():
            for slot in slots.values():
                assert meta["slots"][slot]["var"] == var, (slot, meta["slots"][slot])
        for k, step in enumerate(trace):
            assert list(trace.names("lr")) == ["learning_rate"] and float(step["lr/learning_rate"]) == \
                pytest.approx(LR[name]), trace.names("lr")
            before = trace.state_before(k)
            state = {v: before["var/" + v] for v in variables_}
            truth = numpy_gradients(state, names, *feeds(k))
            for var in variables_:
                shape = state[var].shape
                g, rows = dense_gradient(step, var, shape)
                assert (rows is not None) == sparse[var], (var, sorted(step.keys()))
                np.testing.assert_allclose(g, truth[var], rtol=1e-5, atol=1e-6,
                                           err_msg="grad of %s, step %d" % (var, k))
                slots = {s: before["slot/" + n] for s, n in slot_names[var].items()}
                new, new_slots = expected(name, sparse[var], state[var], slots, g, rows, k + 1, k + 1)
                np.testing.assert_allclose(step["var/" + var], new, rtol=1e-4, atol=1e-6,
                                           err_msg="%s after step %d" % (var, k))
                for s, n in slot_names[var].items():
                    np.testing.assert_allclose(step["slot/" + n], new_slots[s], rtol=1e-4, atol=1e-6,
                                               err_msg="slot %s of %s after step %d" % (s, var, k))
        audit = {v["var"]: v for v in meta["audit"]["variables"]}
        assert sorted(audit) == sorted(variables_), audit
        for var, verdict in audit.items():  # by its kernel's rule, and by re-executing its update when recorded
            assert verdict["verdict"] == "agrees" and verdict.get("by") == "rule and re-execution", verdict


@pytest.mark.tf1
@pytest.mark.parametrize("name", ["addsign", "powersign"])
def test_what_tf1_itself_refuses(tf, name):
    # contrib's AddSign and PowerSign define no update for a resource variable's rows: TF1 raises
    # while the graph is built, so no program trains this way and no golden can hold it
    with tf.Graph().as_default():
        with pytest.raises(NotImplementedError):
            build(tf, name, "resource", "gather")


@pytest.mark.parametrize("variables,gradients", [("ref", "dense"), ("resource", "gather")])
def test_a_planted_wrong_step_of_adagrad_da_fails_both_audits(tf, tmp_path, monkeypatch, variables, gradients):
    # AdagradDA (its update op reads the step counter): the state read after step 1 holds the dense
    # weight moved 1.5 times as far as its update moved it; the kernel's rule and the re-execution
    # of the update both say so, naming the variable and the step
    from tracekit.record.state import RecordedState

    reads, original = [], RecordedState.read

    def planted(self, sess, run):
        got = original(self, sess, run)
        reads.append(got)
        if len(reads) == 3:  # the initial read, after step 0, after step 1
            previous = {key: value for key, _, value in reads[-2]}
            got = [(k, v, previous[k] + 1.5 * (value - previous[k]) if k == "var/m/w:0" else value)
                   for k, v, value in got]
        return got

    monkeypatch.setattr(RecordedState, "read", planted)
    path = str(tmp_path / "planted.h5")
    with tf.Graph().as_default():
        with tracekit.tf1.record(path) as rec:
            (ids, x), loss, train, _, _ = build(tf, "adagrad_da", variables, gradients)
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                for k in range(STEPS):
                    fed_ids, fed_x = feeds(k)
                    sess.run([loss, train], {ids: fed_ids, x: fed_x})
    with tracekit.open(path) as trace:
        recorded = {v["var"]: v for v in trace.meta["reexecuted"]["variables"]}
        audited = {v.var: v for v in tracekit.store.audit_trace(trace).variables}
    assert (recorded["m/w:0"]["verdict"], recorded["m/w:0"]["step"]) == ("disagrees", 1)
    assert (audited["m/w:0"].verdict, audited["m/w:0"].step) == ("disagrees", 1), audited["m/w:0"]
    assert "re-execution when recorded disagrees" in audited["m/w:0"].detail
    assert all(v.verdict == "agrees" for var, v in audited.items() if var != "m/w:0")
