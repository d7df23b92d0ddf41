"""A port whose optimizer is written by hand (a tf.Module updating its variables with assign
ops), as a team ports a TF1 research optimizer no Keras optimizer reproduces: recorded for
real in TF 1.15 (assign_optimizer.py --ordered: Adam with decoupled weight decay, no bias correction,
clip_by_global_norm, the global step advanced by hand). Its gradients are captured where the
port takes them, before and after its clipping; its m, v and step counter are mapped like
variables (by var_map, or named after their variables) and forced, read back."""

from __future__ import annotations

import os

import pytest

import tracekit
from tracekit.errors import ReplayError
from tracekit.keys import UNCLIPPED

from ..support import ROOT, run_python
from ..support.recording import SCRIPTS

STEPS = 5


@pytest.fixture(scope="module")
def golden(legacy_python, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("hand_written") / "assign.h5")
    run_python(legacy_python, ["-m", "tracekit", "record", "-o", path, "--", os.path.join(SCRIPTS, "assign_optimizer.py"),
                               "--steps", str(STEPS), "--ordered"], cwd=ROOT)
    return path


def _port(tf, named=True, bias_correction=False, clip=True, count=True, take="tape", features=3, width=5,
          slip_from=None):
    """The model as Keras layers, and assign_optimizer.py's optimizer written out in TF2; `take`:
    where its gradients come from (GradientTape.gradient, tf.gradients, the compute_gradients of
    a tf.compat.v1.train or a Keras optimizer); `slip_from` N: its gradients scaled by 1 + 1e-3
    after clipping from step N on."""
    model = tf.keras.Sequential([tf.keras.layers.Dense(width, activation="relu", name="hidden"),
                                 tf.keras.layers.Dense(1, name="out")])
    model.build((None, features))
    params = model.trainable_variables

    def slot(p, role):
        return tf.Variable(tf.zeros_like(p), trainable=False, **({"name": p.name[:-2] + "/" + role} if named else {}))
    m, v = [slot(p, "adam_m") for p in params], [slot(p, "adam_v") for p in params]
    counter = tf.Variable(0, dtype=tf.int64, trainable=False, **({"name": "global_step"} if named else {}))
    taker = {"v1": tf.compat.v1.train.GradientDescentOptimizer(1.0), "keras": tf.keras.optimizers.SGD(1.0)}.get(take)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(inputs["x:0"]) - 1.0))
        if take == "tape":
            grads = tape.gradient(loss, params)
        elif take == "tf.gradients":
            grads = tf.gradients(loss, params)
        elif take == "v1":
            grads = [g for g, _ in taker.compute_gradients(loss, params)]
        else:
            grads = [g for g, _ in taker.compute_gradients(loss, params, tape=tape)]
        if clip:
            grads, _ = tf.clip_by_global_norm(grads, 1.0)
        if slip_from is not None:
            grads = [g * (1.0 + 1e-3 * tf.cast(counter >= slip_from, tf.float32)) for g in grads]
        lr = 0.01 * (1.0 - tf.cast(counter, tf.float32) / 100.0)
        t = tf.cast(counter + 1, tf.float32)
        for g, p, m_, v_ in zip(grads, params, m, v):
            next_m, next_v = 0.9 * m_ + 0.1 * g, 0.999 * v_ + 0.001 * tf.square(g)
            if bias_correction:
                update = next_m / (1 - 0.9 ** t) / (tf.sqrt(next_v / (1 - 0.999 ** t)) + 1e-6)
            else:
                update = next_m / (tf.sqrt(next_v) + 1e-6)
            p.assign(p - lr * (update + 0.01 * p))
            m_.assign(next_m)
            v_.assign(next_v)
        if count:
            counter.assign_add(1)
        return {"loss": loss, "lr": lr}
    return model, params, m, v, counter, step


def _replay(tf2, golden, port, **options):
    model, params, m, v, counter, step = port
    with tf2.replay(golden, step, variables=params + m + v + [counter], **options) as actual:
        return tracekit.compare(golden, actual, tracekit.Tolerance.training()), actual.meta["replay"]


def test_a_hand_written_optimizer_is_seen_by_what_it_does(tf2, golden):
    result, replay = _replay(tf2, golden, _port(tf2.tf))
    assert result.ok and not result.missing, result.report()
    compared = {t.key for t in result.tensors}
    with tracekit.open(golden) as trace:
        wanted = {"grad/" + n for n in trace.names("grad")} | {"slot/" + n for n in trace.names("slot")}
        assert any(n.endswith(UNCLIPPED) for n in trace.names("grad"))
    assert wanted | {"var/global_step:0"} <= compared, sorted(wanted - compared)
    assert replay["mapping"]["hidden/kernel/adam_m:0"] == "hidden/kernel/adam_m:0"
    assert replay["matched_by"]["global_step:0"] == "name"


@pytest.mark.parametrize("take", ["tf.gradients", "v1", "keras"])
def test_gradients_are_seen_wherever_the_port_takes_them(tf2, golden, take):
    result, _ = _replay(tf2, golden, _port(tf2.tf, take=take))
    assert result.ok and not result.missing, result.report()
    with tracekit.open(golden) as trace:
        assert {"grad/" + n for n in trace.names("grad")} <= {t.key for t in result.tensors}


def test_optimizer_state_named_otherwise_is_mapped_by_var_map(tf2, golden):
    port = _port(tf2.tf, named=False)
    model, params, m, v, counter, step = port
    with pytest.raises(ReplayError, match="only in TF2: Variable"):
        _replay(tf2, golden, port)
    names = ["hidden/kernel:0", "hidden/bias:0", "out/kernel:0", "out/bias:0"]
    var_map = {name[:-2] + "/adam_m:0": slot for name, slot in zip(names, m)}
    var_map.update({name[:-2] + "/adam_v:0": slot for name, slot in zip(names, v)})
    var_map["global_step:0"] = counter
    result, replay = _replay(tf2, golden, port, var_map=var_map)
    assert result.ok, result.report()
    assert replay["matched_by"]["out/bias/adam_v:0"] == "explicit"


def test_unmapped_optimizer_state_stops_with_the_var_map_to_fill_in(tf2, golden):
    model, params, m, v, counter, step = _port(tf2.tf, named=False)
    with pytest.raises(ReplayError) as raised:
        with tf2.replay(golden, step, variables=params):
            pass
    text = str(raised.value)
    assert "hand-written optimizer" in text and "var_map = {" in text
    assert '"hidden/kernel/adam_m:0": <the port variable holding it>,  # adam_m of hidden/kernel:0' in text
    assert '"global_step:0": <its step counter>' in text


def test_teacher_forcing_sets_the_optimizer_state_and_says_so(tf2, golden):
    result, replay = _replay(tf2, golden, _port(tf2.tf), forcing="state")
    assert result.ok, result.report()
    assert replay["forced"]["step"] == 1
    assert replay["forced"]["set"] == {"var": 5, "slot": 8}  # 4 weights and the counter; m and v of each
    assert replay["forced"]["not_set"] == {}
    assert "set and read back at step 1: 8 optimizer slots, 5 variables and counters" in result.report()


@pytest.mark.parametrize("slip, where", [
    ({"bias_correction": True}, "slot|var"),  # Keras' Adam corrects its moments; BERT's does not
    ({"count": False}, "var/global_step:0"),
])
def test_a_wrong_hand_written_optimizer_is_caught_at_step_0(tf2, golden, slip, where):
    result, _ = _replay(tf2, golden, _port(tf2.tf, **slip))
    assert not result.ok
    first = result.first_divergence
    key = first.kind + "/" + first.name
    assert first.step == 0 and (key == where if "/" in where else first.kind in where.split("|")), \
        result.report()


def test_a_port_that_does_not_clip_is_told_what_is_not_compared(tf2, golden):
    result, replay = _replay(tf2, golden, _port(tf2.tf, clip=False))
    unclipped = [key for key in replay["not_replayed"] if key.endswith(UNCLIPPED)]
    assert unclipped and all("clipped no gradient" in replay["not_replayed"][k] for k in unclipped)


@pytest.fixture(scope="module")
def wide_every(legacy_python, tmp_path_factory):
    """A golden keeping gradients whole at steps 0, 2 and 4 and as digests at 1 and 3, with a hidden
    kernel big enough to be digested in the port's tf.function (digest_ops.SMALLEST)."""
    path = str(tmp_path_factory.mktemp("hand_written") / "wide.h5")
    run_python(legacy_python, ["-m", "tracekit", "record", "--every", "2", "-o", path, "--",
                               os.path.join(SCRIPTS, "assign_optimizer.py"), "--steps", str(STEPS), "--ordered",
                               "--features", "128", "--width", "256"], cwd=ROOT)
    return path


def test_gradients_a_hand_written_optimizer_takes_are_digested_in_its_step(tf2, golden_modes, wide_every):
    # Named only after the step ("#taken:", "#clipped:"), they are digested in the traced step
    # where the golden keeps a digest under every key each may become (the gradient, the one
    # before clipping): both sent at the first such step and checked, the digest alone after.
    from tracekit.tf2.graph_digests import BOTH, DIGEST

    result, _ = _replay(tf2, wide_every, _port(tf2.tf, features=128, width=256))
    assert result.ok and not result.missing, result.report()
    for marker in ("#taken:", "#clipped:"):
        assert golden_modes["grad/%shidden/kernel:0" % marker] == [BOTH, 0, DIGEST, 0]  # steps 1-4 (traced in 0)
        assert "grad/%sout/kernel:0" % marker not in golden_modes  # too small: sent whole, digested in numpy
    with tracekit.open(wide_every) as trace:
        assert {"grad/hidden/kernel:0", "grad/hidden/kernel:0" + UNCLIPPED} <= set(trace.step(3).digests)
    slipped, _ = _replay(tf2, wide_every, _port(tf2.tf, features=128, width=256, slip_from=3))
    first = slipped.first_divergence
    assert first is not None and first.step == 3, slipped.report()  # its gradients pass under the atol; slots do not


@pytest.fixture
def golden_modes(monkeypatch):
    """Per captured "#..." key, the mode graph_digests set before each step it ran (0 where unset)."""
    from tracekit.tf2 import graph_digests

    seen = {}
    plan = graph_digests.GraphDigests.plan

    def spied(self, digested):
        plan(self, digested)
        for key, place in self._index.items():
            if "#" in key:
                seen.setdefault(key, []).append(int(self._current[place]))
    monkeypatch.setattr(graph_digests.GraphDigests, "plan", spied)
    return seen
