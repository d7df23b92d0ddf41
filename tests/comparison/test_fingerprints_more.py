"""Slip fingerprints of the forms no change of a few usual parameters gives (comparison/
clipping.py, momentum.py, epsilon.py, permuted.py), on synthetic teacher-forced traces: a TF1
golden trained by SGD, Momentum (plain or Nesterov) or Adam, and a port that departs from it in
one known way from a generated step on. Each slip must be named with its parameter; a correct
port, one equivalent to it (Keras' SGD momentum) and one wrong in no known way get none of
these names. The fits are also called directly on round-off and noise within the tolerance,
which none of them may explain."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracekit
from tracekit.comparison import clipping, momentum, permuted
from tracekit.comparison.clipping import CLIP_EACH_NORM, CLIP_NORM, CLIP_VALUE
from tracekit.comparison.epsilon import EPSILON_INSIDE
from tracekit.comparison import fingerprints as fp
from tracekit.comparison.momentum import MOMENTUM, NESTEROV
from tracekit.comparison.permuted import PERMUTED, TRANSPOSED
from tracekit.comparison.tolerance import Tolerance

from ..support import build_golden

F4 = np.float32
B1, B2 = F4(0.9), F4(0.999)
NEW_CODES = {CLIP_VALUE, CLIP_NORM, CLIP_EACH_NORM, NESTEROV, MOMENTUM, TRANSPOSED, PERMUTED, EPSILON_INSIDE}
SLOT_ARGS = {"sgd": (), "momentum": ("accum",), "adam": ("m", "v")}


def sgd(w, g, slots, lr, dt="f4"):
    return (w - np.dtype(dt).type(lr) * g).astype(dt), ()


def tf1_momentum(w, g, slots, lr, mu=0.9, nesterov=False, dt="f4"):
    """TF1's MomentumOptimizer: accum' = mu accum + g; var -= lr accum' (Nesterov: lr (g + mu accum')),
    computed in `dt`."""
    lr, mu = np.dtype(dt).type(lr), np.dtype(dt).type(mu)
    accum = (mu * slots[0] + g).astype(dt)
    return (w - lr * (g + mu * accum) if nesterov else w - lr * accum).astype(dt), (accum,)


def keras_momentum(w, g, slots, lr, mu=0.9, dt="f4"):
    """Keras' SGD(momentum=mu): velocity v = -lr accum (TF1's slot, converted), v' = mu v - lr g,
    var += v'. The slot is recorded back in TF1's form, -v' / lr."""
    lr, mu = np.dtype(dt).type(lr), np.dtype(dt).type(mu)
    velocity = (mu * (-lr * slots[0]) - lr * g).astype(dt)
    return (w + velocity).astype(dt), ((-velocity / lr).astype(dt),)


def adam(w, g, slots, lr, eps=1e-6, inside=False, dt="f4"):
    """Adam without bias correction; epsilon outside the square root (TF1's) or inside."""
    b1, b2, eps = np.dtype(dt).type(B1), np.dtype(dt).type(B2), np.dtype(dt).type(eps)
    m = (b1 * slots[0] + (1 - b1) * g).astype(dt)
    v = (b2 * slots[1] + (1 - b2) * g * g).astype(dt)
    root = np.sqrt(v + eps) if inside else np.sqrt(v) + eps
    return (w - np.dtype(dt).type(lr) * (m / root)).astype(dt), (m, v)


def clip_by_global_norm(grads, clip_norm):
    """tf.clip_by_global_norm, in float32."""
    norm = np.sqrt(sum(np.sum(np.square(g)) for g in grads.values()), dtype=F4)
    scale = F4(clip_norm) * min(F4(1) / norm, F4(1) / F4(clip_norm))
    return {n: (g * scale).astype("f4") for n, g in grads.items()}


def clip_each_by_norm(grads, clip_norm):
    """tf.clip_by_norm of each gradient alone, in float32."""
    out = {}
    for name, g in grads.items():
        norm = np.sqrt(np.sum(np.square(g)), dtype=F4)
        out[name] = (g * F4(clip_norm) / max(norm, F4(clip_norm))).astype("f4")
    return out


def traces(tmp_path, seed, shapes, optimizer, golden_update, port_update=None, at=1, steps=3, lr=0.1,
           golden_grads=None, port_grads=None, port_move=None, magnitudes=(-3, -1), outliers=0):
    """The comparison of a golden (its gradients `golden_grads` of the raw ones, its update
    `golden_update`) and a teacher-forced port from the golden's state, whose gradients, update or
    move (port_move(name, golden's move)) differ from step `at` on. Raw gradients have magnitudes
    10^U(magnitudes) and `outliers` elements a tensor 1.5 to 3 times the largest. Slots: meta
    "slots" of `optimizer`'s arguments."""
    rs = np.random.RandomState(seed)
    state = {name: rs.randn(*shape).astype("f4") for name, shape in shapes.items()}
    args = SLOT_ARGS[optimizer]
    slots = {name: tuple(np.zeros_like(w) for _ in args) for name, w in state.items()}
    meta_slots = {"%s/%s:0" % (name[:-2], arg): {"var": name, "arg": arg} for name in state for arg in args}
    initial = {"var/" + n: w.copy() for n, w in state.items()}
    initial.update({"slot/%s/%s:0" % (n[:-2], arg): slots[n][i] for n in state for i, arg in enumerate(args)})
    golden_steps, port_steps = [], []
    for k in range(steps):
        raw = {name: (rs.randn(*w.shape) * 10.0 ** rs.uniform(*magnitudes, w.shape)).astype("f4")
               for name, w in state.items()}
        for grad in raw.values():
            where = rs.choice(grad.size, outliers, replace=False)
            grad.reshape(-1)[where] = rs.choice([-1, 1], outliers) * rs.uniform(1.5, 3, outliers) * \
                10.0 ** magnitudes[1]
        g_grads = golden_grads(raw) if golden_grads else raw
        slipped = k >= at
        p_grads = port_grads(raw) if port_grads and slipped else g_grads
        common = {"input/x:0": rs.randn(4, 3).astype("f4"), "loss/loss": F4(1.0 / (k + 1)), "lr/learning_rate": F4(lr)}
        g_out, p_out = dict(common), dict(common)
        for name, w in list(state.items()):
            new_w, new_slots = golden_update(w, g_grads[name], slots[name], lr)
            p_w, p_slots = (port_update or golden_update)(w, p_grads[name], slots[name], lr) if slipped else \
                (new_w, new_slots)
            if port_move is not None and slipped:
                p_w = (w + port_move(name, new_w - w)).astype("f4")
            for out, grads, value, values in ((g_out, g_grads, new_w, new_slots), (p_out, p_grads, p_w, p_slots)):
                out["grad/" + name] = grads[name]
                out.update({"slot/%s/%s:0" % (name[:-2], arg): values[i] for i, arg in enumerate(args)})
                out["var/" + name] = value
            state[name], slots[name] = new_w, new_slots
        golden_steps.append(g_out)
        port_steps.append(p_out)
    return compared(tmp_path, golden_steps, port_steps, initial, meta_slots)


def compared(tmp_path, golden_steps, port_steps, initial, meta_slots):
    """The comparison of a golden of these steps and a port's, teacher-forced from its state."""
    golden = build_golden(str(tmp_path / "golden.h5"), iter(golden_steps), initial, meta={"slots": meta_slots})
    actual = build_golden(str(tmp_path / "actual.h5"), iter(port_steps), initial,
                          meta={"slots": meta_slots, "replay": {"forcing": "state"}})
    return tracekit.compare(golden, actual)


def named(result, code):
    """The one fingerprint, of `code`, naming the first divergence's tensor."""
    assert not result.ok
    assert [f.code for f in result.fingerprints] == [code], result.fingerprints
    found = result.fingerprints[0]
    assert result.first_divergence.key in found.keys
    assert "named cause" in result.report()
    json.dumps(result.to_dict(by_step=False), allow_nan=False)
    return found


def clip_values(c):
    return lambda raw: {n: np.clip(g, F4(-c), F4(c)) for n, g in raw.items()}


def unchanged(raw):
    return raw


def layout(rows, h, blocks):
    """A square kernel and one of `blocks` gate blocks of h columns each."""
    return {"k:0": (h + 1, h + 1), "lstm:0": (rows, blocks * h)}


def scenario(slip, seed, rows, cols):
    """(traces' arguments, (code, the keys it may name, golden's parameter, port's, detail))."""
    rs = np.random.RandomState(seed)
    base = {"w:0": (rows, cols), "b:0": (cols,)}
    grads, variables = ("grad/w:0", "grad/b:0"), ("var/w:0", "var/b:0")
    if slip.startswith("clip-value"):
        c = float(10.0 ** rs.uniform(-2, 0))
        clip, port = (clip_values(c), None) if slip.endswith("port") else (None, clip_values(c))
        args = dict(optimizer="sgd", golden_update=sgd, golden_grads=port, port_grads=clip or unchanged,
                    magnitudes=(np.log10(c) - 1, np.log10(c) + 1), outliers=3)
        inf = float("inf")
        return dict(args, shapes=base), (CLIP_VALUE, grads) + ((inf, c) if slip.endswith("port") else (c, inf))
    if slip.startswith("clip-norm"):
        norm = float(rs.choice([0.1, 0.5, 1.0, 2.5, 5.0, 10.0]))
        clip = lambda raw: clip_by_global_norm(raw, norm)  # noqa: E731
        on_port = slip.endswith("port")
        args = dict(optimizer="sgd", golden_update=sgd, golden_grads=None if on_port else clip,
                    port_grads=clip if on_port else unchanged, magnitudes=(np.log10(norm) - 1, np.log10(norm)),
                    outliers=2)
        inf = float("inf")
        return dict(args, shapes=base), (CLIP_NORM, grads) + ((inf, norm) if on_port else (norm, inf))
    if slip.startswith("clip-each"):
        norm = float(rs.choice([0.01, 0.05, 0.1, 0.5]))
        clip = lambda raw: clip_each_by_norm(raw, norm)  # noqa: E731
        on_port = slip.endswith("port")
        # every gradient's norm is past the clip: magnitudes of the clip norm each element, over 8 or more
        args = dict(optimizer="sgd", golden_update=sgd, golden_grads=None if on_port else clip,
                    port_grads=clip if on_port else unchanged, magnitudes=(np.log10(norm), np.log10(norm) + 1))
        inf = float("inf")
        return dict(args, shapes=base), (CLIP_EACH_NORM, grads) + ((inf, norm) if on_port else (norm, inf))
    if slip in ("nesterov-added", "nesterov-missing", "momentum"):
        mu = float(rs.choice([0.9, 0.5, 0.99]))
        nesterov = slip == "nesterov-missing"
        golden = lambda *a: tf1_momentum(*a, mu=mu, nesterov=nesterov)  # noqa: E731
        if slip == "momentum":
            mu_p = float(rs.choice([m for m in momentum.MOMENTA if m != mu and m < 0.999]))
            port = lambda *a: tf1_momentum(*a, mu=mu_p)  # noqa: E731
            return dict(shapes=base, optimizer="momentum", golden_update=golden, port_update=port), \
                (MOMENTUM, variables, mu, mu_p)
        port = lambda *a: tf1_momentum(*a, mu=mu, nesterov=not nesterov)  # noqa: E731
        return dict(shapes=base, optimizer="momentum", golden_update=golden, port_update=port), \
            (NESTEROV, variables, float(nesterov), float(not nesterov))
    if slip.startswith("epsilon"):
        eps = float(rs.choice([1e-8, 1e-7, 1e-6]))
        inside = slip == "epsilon-inside"  # the port's
        golden = lambda *a: adam(*a, eps=eps, inside=not inside)  # noqa: E731
        port = lambda *a: adam(*a, eps=eps, inside=inside)  # noqa: E731
        return dict(shapes=base, optimizer="adam", golden_update=golden, port_update=port, lr=1e-3,
                    magnitudes=(-7, 0)), \
            (EPSILON_INSIDE, variables, eps, eps, {"inside": "port" if inside else "golden"})
    # a kernel's layout, whatever the optimizer
    optimizer = str(rs.choice(["sgd", "momentum", "adam"]))
    update = {"sgd": sgd, "momentum": tf1_momentum, "adam": adam}[optimizer]
    blocks = int(rs.choice([3, 4]))
    shapes = layout(rows, int(rs.randint(2, 6)), blocks)
    order = tuple(int(i) for i in rs.permutation(blocks))
    while order == tuple(range(blocks)):
        order = tuple(int(i) for i in rs.permutation(blocks))
    name, code, change = ("k:0", TRANSPOSED, lambda x: x.T) if slip.startswith("transposed") else \
        ("lstm:0", PERMUTED, lambda x: permuted.permute(x, order).astype("f4"))
    args = dict(shapes=shapes, optimizer=optimizer, golden_update=update, lr=1e-3 if optimizer == "adam" else 0.1)
    if slip.endswith("grad"):
        args["port_grads"] = lambda raw: {n: change(g) if n == name else g for n, g in raw.items()}
    else:
        args["port_move"] = lambda n, move: change(move) if n == name else move
    expected = (0.0, 1.0, {}) if code == TRANSPOSED else \
        (float(blocks), float(blocks), {"order": ", ".join(str(i) for i in order)})
    return args, (code, ("%s/%s" % ("grad" if slip.endswith("grad") else "var", name),)) + expected


SLIPS = ["clip-value-port", "clip-value-golden", "clip-norm-port", "clip-norm-golden", "clip-each-port",
         "clip-each-golden", "nesterov-added",
         "nesterov-missing", "momentum", "epsilon-inside", "epsilon-outside", "transposed-move", "transposed-grad",
         "permuted-move", "permuted-grad"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 31 - 1), slip=st.sampled_from(SLIPS), at=st.integers(0, 2),
       rows=st.integers(2, 8), cols=st.integers(8, 16))
def test_a_slip_is_named_with_its_parameter(tmp_path, seed, slip, at, rows, cols):
    args, expected = scenario(slip, seed, rows, cols)
    if slip in ("nesterov-added", "nesterov-missing", "momentum"):
        at = max(at, 1)  # TF1's accumulator starts at zero: its momentum is told from step 1 on
    code, keys, golden_value, port_value = expected[:4]
    result = traces(tmp_path, seed, at=at, **args)
    assert result.first_divergence.step == at
    if code == CLIP_NORM and result.fingerprints and result.fingerprints[0].code == fp.GRAD_SCALE:
        # a factor that is a loss scale's (a power of two, a whole number, or the inverse) stays a scale
        found = named(result, fp.GRAD_SCALE)
        assert clipping.scale_like(found.port)
        return
    found = named(result, code)
    assert set(found.keys) <= set(keys)
    assert found.golden == pytest.approx(golden_value, rel=2e-3) and found.port == pytest.approx(port_value, rel=2e-3)
    for key, value in (expected[4] if len(expected) > 4 else {}).items():
        assert found.detail[key] == value


def recomputed(update):
    """The same update computed in float64 and rounded once: float32 round-off otherwise, an ulp
    or so of each value."""
    def again(w, g, slots, lr):
        new_w, new_slots = update(w.astype("f8"), g.astype("f8"), tuple(s.astype("f8") for s in slots), lr, dt="f8")
        return new_w.astype("f4"), tuple(s.astype("f4") for s in new_slots)
    return again


OPTIMIZERS = {"sgd": ("sgd", sgd), "momentum": ("momentum", tf1_momentum),
              "nesterov": ("momentum", functools.partial(tf1_momentum, nesterov=True)),
              "adam": ("adam", adam), "adam-inside": ("adam", functools.partial(adam, inside=True))}


def noisy(scale, seed):
    """Uniform noise of `scale` (a function of the value) on a move or a gradient."""
    rs = np.random.RandomState(seed)
    return lambda x: (x + rs.uniform(-1, 1, x.shape) * scale(x)).astype("f4")


def within(x):
    """Under the default tolerance of a variable or a gradient: atol 1e-5 and rtol 1e-6."""
    return 1e-5 + 1e-6 * np.abs(x)


def fitted_codes(tmp_path, resolve):
    """The fingerprints' codes of every tensor that differs at all, at each step, called directly."""
    codes = set()
    with tracekit.open(str(tmp_path / "golden.h5")) as golden, tracekit.open(str(tmp_path / "actual.h5")) as actual:
        for step in range(len(golden)):
            g_step, a_step = golden.step(step), actual.step(step)
            for kind in ("grad", "var"):
                values = {key: (g_step[key], a_step[key]) for key in g_step
                          if key.startswith(kind + "/") and not np.array_equal(g_step[key], a_step[key])}
                codes |= {f.code for f in fp.fingerprints(golden, step, values, resolve, kind)}
    return codes


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 31 - 1), optimizer=st.sampled_from(sorted(OPTIMIZERS)), at=st.integers(0, 2),
       noise=st.sampled_from([0.0, 0.3, 0.9]), h=st.integers(2, 5), blocks=st.sampled_from([3, 4]))
def test_round_off_and_noise_within_the_tolerance_fit_none_of_these_forms(tmp_path, seed, optimizer, at, noise, h,
                                                                           blocks):
    # float32 round-off of the same update (recomputed in float64, rounded once), plus noise under
    # the tolerance on every gradient and move: the comparison passes, and the fits called on
    # every tensor that differs at all, at the comparison's tolerance and at one of 2 ulps of the
    # scale, name none of these forms
    kind, update = OPTIMIZERS[optimizer]
    shapes = dict(layout(3, h, blocks), **{"w:0": (4, 12), "b:0": (12,)})
    lr = 1e-3 if kind == "adam" else 0.1
    grads, moves = noisy(lambda x: noise * within(x), seed), noisy(lambda x: noise * 0.5 * within(x), seed + 1)
    result = traces(tmp_path, seed, shapes, kind, update, port_update=recomputed(update), at=at, lr=lr,
                    port_grads=lambda raw: {n: grads(g) for n, g in raw.items()}, port_move=lambda n, move: moves(move),
                    magnitudes=(-6, 0) if kind == "adam" else (-3, -1))
    assert result.ok and result.fingerprints == []
    tight = Tolerance(atol=0.0, rtol=0.0, ulps=2.0)
    for resolve in (Tolerance().resolve, tight.resolve):
        assert not fitted_codes(tmp_path, resolve) & NEW_CODES


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 31 - 1), optimizer=st.sampled_from(sorted(OPTIMIZERS)), at=st.integers(0, 2),
       noise=st.sampled_from([1e-4, 1e-3, 1e-2]), on=st.sampled_from(["grad", "var"]), h=st.integers(2, 5),
       blocks=st.sampled_from([3, 4]))
def test_a_difference_no_form_explains_gets_none_of_these_names(tmp_path, seed, optimizer, at, noise, on, h, blocks):
    kind, update = OPTIMIZERS[optimizer]
    shapes = dict(layout(3, h, blocks), **{"w:0": (4, 12), "b:0": (12,)})
    lr = 1e-3 if kind == "adam" else 0.1
    wrong = noisy(lambda x: noise * (1 + np.abs(x)), seed)
    args = {"port_grads": lambda raw: {n: wrong(g) for n, g in raw.items()}} if on == "grad" else \
        {"port_move": lambda n, move: wrong(move)}
    result = traces(tmp_path, seed, shapes, kind, update, at=at, lr=lr, **args)
    assert not result.ok and result.first_divergence.step == at
    assert not {f.code for f in result.fingerprints} & NEW_CODES, result.fingerprints


def test_round_numbers_and_loss_scales():
    assert clipping.round_value(5.0004) == 5.0 and clipping.round_value(0.2501) == 0.25
    assert clipping.round_value(1.2345) is None and clipping.round_value(float("inf")) is None
    assert clipping.scale_like(0.25) and clipping.scale_like(3.0) and clipping.scale_like(1 / 48) and \
        clipping.scale_like(2.0 ** 15)
    assert not clipping.scale_like(0.3) and not clipping.scale_like(100.5) and not clipping.scale_like(1 / 1000.3)
    # a factor under 1 clips the port to its norm, over 1 the golden; a norm that is not round is no clip
    assert clipping.by_global_norm(1.0 / 7.3, 7.3)[:2] == (float("inf"), 1.0)
    assert clipping.by_global_norm(7.3, 1.0)[:2] == (1.0, float("inf"))
    assert clipping.by_global_norm(1.0 / 7.3, 7.3 * 1.2345) is None


def test_a_clip_by_value_needs_two_elements_at_the_threshold():
    # one element clipped "explains" itself: c is its value
    rs = np.random.RandomState(0)
    golden = (rs.randn(32) * 0.01).astype("f4")
    golden[3] = 1.0
    port = golden.copy()
    port[3] = 0.5
    tol = Tolerance().resolve("grad", "w:0", 0, "float32")
    assert clipping.by_value("grad/w:0", golden, port, tol) is None
    golden[7] = -2.0
    port[7] = -0.5
    found = clipping.by_value("grad/w:0", golden, port, tol)
    assert found.code == CLIP_VALUE and (found.golden, found.port) == (float("inf"), 0.5)


def test_an_order_two_orders_explain_is_not_named():
    # blocks 0 and 1 of the move alike: swapping 2 and 3 is told, which of 0 and 1 comes first is not
    rs = np.random.RandomState(1)
    move = rs.randn(5, 4, 3)
    move[:, 1] = move[:, 0]
    move = move.reshape(5, 12)
    tol = Tolerance().resolve("grad", "g:0", 0, "float32")
    assert permuted.fit("grad/g:0", None, move, permuted.permute(move, (0, 1, 3, 2)), tol) is None
    move[:, 3:6] += 1.0
    found = permuted.fit("grad/g:0", None, move, permuted.permute(move, (0, 1, 3, 2)), tol)
    assert found.code == PERMUTED and found.detail == {"order": "0, 1, 3, 2"}


@pytest.mark.parametrize("at", [0, 1, 2])
def test_keras_momentum_is_tf1s_at_a_constant_rate(tmp_path, at):
    result = traces(tmp_path, 4, {"w:0": (6, 12), "b:0": (12,)}, "momentum", tf1_momentum, port_update=keras_momentum,
                    at=at)
    assert result.ok and result.fingerprints == []


def test_nesterov_at_tf1s_first_step_is_a_factor_of_the_rate(tmp_path):
    # the accumulator starts at zero: Nesterov's step is (1 + mu) x plain momentum's, mu not told
    result = traces(tmp_path, 4, {"w:0": (6, 12), "b:0": (12,)}, "momentum", tf1_momentum,
                    port_update=functools.partial(tf1_momentum, nesterov=True), at=0)
    found = named(result, fp.LR_FACTOR)
    assert found.port == pytest.approx(1.9, rel=1e-4)


def test_a_clip_by_global_norm_giving_a_loss_scales_factor_stays_a_scale(tmp_path):
    # the golden's global norm is exactly twice the port's clip_norm: the factor 0.5 is a loss
    # scale's as much as a clip's; the round norm is noted
    def rescaled(raw):
        norm = np.sqrt(sum(np.sum(np.square(g.astype("f8"))) for g in raw.values()))
        return {n: (g * (2.0 / norm)).astype("f4") for n, g in raw.items()}
    result = traces(tmp_path, 5, {"w:0": (6, 12), "b:0": (12,)}, "sgd", sgd, golden_grads=rescaled,
                    port_grads=lambda raw: clip_by_global_norm(rescaled(raw), 1.0))
    found = named(result, fp.GRAD_SCALE)
    assert found.port == pytest.approx(0.5, rel=1e-5) and found.detail["clip_norm"] == 1.0
    assert "clipped by global norm (one side's global norm is 1" in result.report()


@pytest.mark.parametrize("code, golden, port, detail, words", [
    (CLIP_VALUE, float("inf"), 0.5, {}, "TF1 does not clip, the port clips at 0.5"),
    (CLIP_VALUE, 1.0, float("inf"), {}, "TF1 clips at 1, the port does not clip"),
    (CLIP_NORM, float("inf"), 5.0, {"factor": 0.5, "golden_norm": 10.0, "port_norm": 5.0},
     "the port clips to clip_norm=5 and TF1 does not"),
    (NESTEROV, 0.0, 1.0, {"mu": 0.9}, "Nesterov momentum added"),
    (NESTEROV, 1.0, 0.0, {"mu": 0.9}, "Pass nesterov=True"),
    (MOMENTUM, 0.9, 0.99, {"nesterov": 0.0}, "momentum 0.99, TF1's 0.9"),
    (EPSILON_INSIDE, 1e-8, 1e-8, {"inside": "port"}, "is m / sqrt(v + epsilon) with epsilon=1e-08, TF1's m / (sqrt"),
    (TRANSPOSED, 0.0, 1.0, {}, "TF1's transposed"),
    (PERMUTED, 4.0, 4.0, {"order": "0, 2, 1, 3"}, "blocks in the order 0, 2, 1, 3"),
])
def test_each_form_has_its_text(code, golden, port, detail, words):
    from tracekit.report.fingerprints import fingerprint

    line = fingerprint(fp.Fingerprint(code, 1, ("var/k:0",), golden, port, 0.5, detail))
    assert line.startswith("named cause: ") and words in line and "step 1" in line
