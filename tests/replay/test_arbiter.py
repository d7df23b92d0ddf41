"""The float64 arbiter and the verdict on long goldens, on a discontinuity every machine crosses
alike: relu((1 + 1e-8) - 1) is relu(0) in float32 and relu(1e-8) in float64, whatever the CPU,
so summing three terms in another order puts one ReLU on the other side of its kink and moves
its whole gradient. The goldens are derived (tracekit.tf2.derive of the golden's own order); the
steps run eagerly, where the order written is the order summed."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

import tracekit
from tracekit.comparison.arbiter import EXPLAINED, LONG_GOLDEN, PORT, UNDECIDED
from tracekit.replay.options import ReplayOptions

X = np.array([[1.0, -1.0, 1e-8]], dtype=np.float32)
FAR = np.array([[1.0, 1.0, 1.0]], dtype=np.float32)  # every sum far from the kink


def _kink_layer(tf, order, dtype=None, attribute=False):
    """relu of two sums: x0 w0 + x1 w1 + x2 w2 summed in `order` ("golden": (x0 w0 + x1 w1) + x2 w2,
    exactly 1e-8 in float32; "port": (x0 w0 + x2 w2) + x1 w1, 0 in float32 and 1e-8 in float64),
    and x0 w0 (= 1, the layer's scale); `attribute`: the ReLU is the layer's `activation`, as a
    Dense's, not a tf.nn.relu of its own."""

    class Kink(tf.keras.layers.Layer):
        def build(self, shape):
            self.w = self.add_weight(name="w", shape=(3,), initializer="ones")
            self.activation = tf.keras.activations.get("relu") if attribute else None

        def call(self, x):
            terms = [x[:, i] * self.w[i] for i in range(3)]
            first = (terms[0] + terms[1]) + terms[2] if order == "golden" else (terms[0] + terms[2]) + terms[1]
            z = tf.stack([first, terms[0]], axis=1)
            return self.activation(z) if attribute else tf.nn.relu(z)
    return Kink(name="kink", dtype=dtype)


def make(order="port", doubled=False, float32=None, tapped=True, attribute=False):
    """(model, step): the kink model, an SGD of rate 0 (every step sees the same state); doubled:
    a wrong port (its loss twice the golden's); float32: a port that makes float32 of its own:
    a float32 tf.constant, tf.one_hot and tf.cast in its loss ("created", which the arbiter
    widens), a raw op's float32 ("op") or its layer's dtype ("layer"), which it cannot; tapped:
    its output is tapped "kink"; attribute: its ReLU is the layer's activation attribute."""
    tf = tracekit.tf2.tf
    kink = _kink_layer(tf, order, "float32" if float32 == "layer" else None, attribute)
    model = tf.keras.Sequential([kink])
    model.build((None, 3))
    optimizer = tf.keras.optimizers.SGD(0.0)

    def step(inputs):  # eager: Grappler would fold the two additions into one AddN, in one order

        with tf.GradientTape() as tape:
            out = model(inputs["x"])
            out = tracekit.tap("kink", out) if tapped else out
            loss = tf.reduce_sum(out) * (2.0 if doubled else 1.0)
            if float32 == "created":
                one = tf.reduce_sum(tf.one_hot([0], 2)) * tf.cast(tf.constant(1), tf.float32)
                loss = loss * tf.constant(1.0, tf.float32) * one + tf.zeros([]) + tf.constant(0.0)
            if float32 == "op":  # a raw op fixes float32: not a tf.<creation> the arbiter widens
                loss = loss * tf.raw_ops.Cast(x=tf.ones([]), DstT=tf.float32)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}
    return model, step


@pytest.fixture(scope="module")
def goldens(tmp_path_factory):
    """golden(order, steps, kinks): a golden of `steps` steps made by that order's own run, the
    first `kinks` of them (all by default) at the kink."""
    made = {}

    def golden(order, steps, kinks=None, **options):
        kinks = steps if kinks is None else kinks
        key = (order, steps, kinks) + tuple(sorted(options.items()))
        if key not in made:
            path = str(tmp_path_factory.mktemp("kink") / ("%s-%d-%d.h5" % (order, steps, kinks)))
            model, step = make(order, **options)
            data = [{"x": X if index < kinks else FAR} for index in range(steps)]
            tracekit.tf2.derive(step, data, model=model).save(path)
            made[key] = path
        return made[key]
    return golden


def test_the_ports_float32_crossing_the_kink_is_explained(tf2, goldens):
    golden = goldens("golden", 2)
    model, step = make("port")
    assert not tf2.check(golden, step, model=model).ok  # a plain check fails the correct port
    result = tf2.check(golden, make_port=functools.partial(make, "port"), judge="local")
    assert result.ok and result.judged == "local" and result.first_divergence is None
    steps = result.arbitration.steps
    assert [a.step for a in steps] == [0, 1] and all(a.verdict == EXPLAINED and a.side == "port" for a in steps)
    flip = steps[0].flips[0]
    assert flip.layer == "layer kink" and flip.kind == "zero" and (flip.elements, flip.total) == (1, 2)
    assert flip.where == ((0, 0),) and 0 < flip.margin_ulps < 1  # 1e-8 against a scale of 1: 0.08 ulps
    failing = {t.key for t in steps[0].tensors}
    assert "grad/kink/w:0" in failing and all(t.float64_ok for t in steps[0].tensors)
    assert result.tensor("grad", "kink/w:0").accepted_steps == 2
    text = result.report()
    assert "judged: local" in text and "the port's float32 took the other side" in text
    assert "layer kink: 1 of 2 elements zero in one precision only" in text and "decided by: both views" in text
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["judged"] == "local" and data["arbitration"]["steps"][0]["side"] == "port"
    assert data["drift"]["ok"] is True


def test_the_goldens_float32_crossing_the_kink_is_explained_at_its_tap(tf2, goldens):
    # The golden summed in the order that rounds to 0; the port's float32 and float64 agree on 1e-8.
    golden = goldens("port", 2)
    result = tf2.check(golden, make_port=functools.partial(make, "golden"), judge="local")
    assert result.ok, result.report()
    arbitration = result.arbitration.steps[0]
    assert arbitration.side == "golden" and not arbitration.flips  # the port's two precisions agree
    assert not all(t.float64_ok for t in arbitration.tensors)
    (flip,) = arbitration.golden_flips
    assert flip.layer == "golden tap kink" and flip.margin_ulps < 1


def test_the_goldens_float32_crossing_the_kink_is_found_without_taps(tf2, goldens):
    # No taps: the float64 port's pre-activation 1e-8 is the one within round-off of the kink, and its
    # replay with that decision turned over agrees with the golden on every tensor.
    options = dict(tapped=False, attribute=True)
    golden = goldens("port", 2, **options)
    result = tf2.check(golden, make_port=functools.partial(make, "golden", **options), judge="local")
    assert result.ok, result.report()
    for arbitration in result.arbitration.steps:
        assert arbitration.side == "golden" and arbitration.reproduced and not arbitration.flips
        (flip,) = arbitration.golden_flips
        assert flip.layer == "layer kink (pre-activation)" and flip.where == ((0, 0),) and flip.margin_ulps < 1
    text = result.report()
    assert "once it takes the other side of the kink where the golden's float32 did" in text
    assert "layer kink (pre-activation): 1 of 2 elements zero in one precision only" in text


@pytest.mark.parametrize("options", [dict(tapped=False, attribute=True, doubled=True),
                                     dict(tapped=False, attribute=False)])
def test_turning_a_decision_over_does_not_excuse_a_wrong_port_or_an_unseen_relu(tf2, goldens, options):
    # A wrong port stays wrong with the kink's decision turned over; a tf.nn.relu of the port's own
    # is not seen without a tap, so the golden's side is not claimed.
    golden = goldens("port", 2, tapped=False, attribute=True)
    result = tf2.check(golden, make_port=functools.partial(make, "golden", **options), judge="local")
    assert not result.ok and result.first_divergence.step == 0
    (arbitration,) = result.arbitration.steps
    assert arbitration.verdict == PORT and not arbitration.reproduced


def test_a_wrong_port_is_the_ports_error(tf2, goldens):
    golden = goldens("golden", 2)
    result = tf2.check(golden, make_port=functools.partial(make, "golden", doubled=True), judge="local")
    assert not result.ok and result.first_divergence.step == 0
    (arbitration,) = result.arbitration.steps  # the first unexplained step ends the arbitration
    assert arbitration.verdict == PORT and not arbitration.explained
    assert result.drift is None and "drift: not measured" in result.report()
    assert "decided by: the local view" in result.report()


@pytest.mark.parametrize("float32, why", [("op", "the port's step mixes float32 and float64"),
                                          ("layer", "kink/w:0")])
def test_a_port_that_cannot_compute_in_float64_is_undecided_and_fails(tf2, goldens, float32, why):
    golden = goldens("golden", 2)
    result = tf2.check(golden, make_port=functools.partial(make, "port", float32=float32), judge="local")
    assert not result.ok
    (arbitration,) = result.arbitration.steps
    assert arbitration.verdict == UNDECIDED and why in arbitration.error
    assert "undecided, the float64 port could not run" in result.report()


def test_what_the_port_creates_in_float32_is_widened_for_the_float64_port(tf2, goldens):
    # tf.one_hot, tf.cast(..., tf.float32), tf.constant, tf.zeros in the port's loss: arbitrated,
    # and the crossing of the kink explained as for the port without them
    golden = goldens("golden", 2)
    result = tf2.check(golden, make_port=functools.partial(make, "port", float32="created"), judge="local")
    assert result.ok and [a.verdict for a in result.arbitration.steps] == [EXPLAINED, EXPLAINED], result.report()


def test_the_widening_is_of_float32_alone_and_undone_after(tf2):
    from tracekit.tf2.float64 import float64_creations

    tf = tracekit.tf2.tf
    with float64_creations():
        widened = [tf.one_hot([1], 3), tf.cast([1, 2], tf.float32), tf.constant(1.0), tf.constant(np.ones(2, "f4")),
                   tf.zeros([2]), tf.ones([2], "float32"), tf.fill([2], 0.5), tf.convert_to_tensor(2.5),
                   tf.zeros_like(np.ones(2, "f4")), tf.eye(2)]
        kept = [tf.constant(1), tf.zeros([2], tf.int32), tf.cast(1.5, tf.int64), tf.one_hot([1], 3, dtype=tf.int32),
                tf.constant(1.0, tf.float16), tf.convert_to_tensor(tf.ones([2], tf.float16))]
    assert all(t.dtype == tf.float64 for t in widened), [t.dtype for t in widened]
    assert [t.dtype for t in kept] == [tf.int32, tf.int32, tf.int64, tf.int32, tf.float16, tf.float16]
    assert tf.constant(1.0).dtype == tf.float32 and tf.one_hot([1], 3).dtype == tf.float32  # undone


def test_long_goldens_are_judged_locally_by_default(tf2, goldens):
    port = functools.partial(make, "port")
    short = tf2.check(goldens("golden", LONG_GOLDEN, kinks=1), make_port=port)
    assert short.judged == "plain" and not short.ok  # the short-golden default stays
    long = tf2.check(goldens("golden", LONG_GOLDEN + 1, kinks=1), make_port=port)
    assert long.judged == "local" and long.ok, long.report()
    assert [a.step for a in long.arbitration.steps] == [0] and long.drift.ok
    assert long.drift.steps == LONG_GOLDEN + 1


def test_the_arbiter_stops_after_its_step_budget(tf2, goldens):
    # Every step at the kink: the first ARBITRATED_STEPS are explained, the rest count as the port's.
    result = tf2.check(goldens("golden", 18), make_port=functools.partial(make, "port"), judge="local")
    assert len(result.arbitration.steps) == 16 and all(a.explained for a in result.arbitration.steps)
    assert not result.ok and result.first_divergence.step == 16
    assert "the arbiter stopped after 16 failing steps" in " ".join(result.notes)


def test_check_needs_a_step_or_a_factory(tf2, goldens):
    with pytest.raises(tracekit.UsageError, match="make_port"):
        tf2.check(goldens("golden", 2))
    with pytest.raises(tracekit.UsageError, match="judge must be one of"):
        tf2.check(goldens("golden", 2), make_port=make, judge="sometimes")
    with pytest.raises(tracekit.UsageError, match="forcing"):
        tf2.check(goldens("golden", 2), make_port=make, judge="local", forcing="state")


def _own_run(path, w):
    """The golden order's run of two steps from another state: kink/w:0 starting at `w`."""
    model, step = make("golden")
    model.layers[0].w.assign(np.asarray(w, np.float32))
    tracekit.tf2.derive(step, [{"x": X}] * 2, model=model).save(path)
    return path


@pytest.mark.parametrize("w, side", [((1.0, 1.0, 1.0), None), ((1.0, 1.0000002, 1.0), "between")])
def test_a_kink_between_two_trajectories_is_told_from_a_real_departure(tf2, goldens, tmp_path, w, side):
    # The golden's order, from the golden's state and from one 2e-7 away in w1: there z0 < 0.
    from tracekit.tf2.arbiter import crossed
    from tracekit.tf2.live import _port_runs

    port = functools.partial(make, "golden")
    with tracekit.open(goldens("golden", 2)) as golden, tracekit.open(_own_run(str(tmp_path / "own.h5"), w)) as own:
        runs = _port_runs(golden, None, port, None, ReplayOptions())
        found = crossed(golden, own, 0, runs.make_port, runs.replay_one)
    if side is None:
        assert found.verdict == PORT  # the same state, the same decisions: a departure there is real
    else:
        assert found.explained and found.side == side and not found.also  # no crossing of its own float32
        (flip,) = found.golden_flips
        assert flip.layer == "layer kink" and flip.where == ((0, 0),)
        assert "a discontinuity between the port's own trajectory and the golden's" in found.describe()


def test_the_ports_own_float32_crossing_a_kink(tf2, goldens, tmp_path):
    from tracekit.tf2.arbiter import crossed
    from tracekit.tf2.live import _port_runs

    port = functools.partial(make, "port")  # from the golden's own state its float32 and float64 disagree
    model, step = port()
    with tracekit.open(goldens("golden", 2)) as golden, \
            tf2.replay(golden.path, step, model=model, out=str(tmp_path / "own.h5")) as own:
        runs = _port_runs(golden, None, port, None, ReplayOptions())
        found = crossed(golden, own, 1, runs.make_port, runs.replay_one)
    assert found.explained and found.side == "port" and "grad/kink/w:0" in {t.key for t in found.also}


def test_the_check_and_diff_commands(tf2, goldens, tmp_path, capsys):
    from tracekit.cli import main

    golden = goldens("golden", 2)
    port = "tests.replay.test_arbiter:make"  # make() is the correct port, summing in its own order
    assert main(["check", golden, port, "--judge", "local", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and data["judged"] == "local" and len(data["arbitration"]["steps"]) == 2
    assert main(["check", golden, port, "--judge", "plain"]) == 1
    assert "judged:" not in capsys.readouterr().out
    long = goldens("golden", LONG_GOLDEN + 1, kinks=1)
    model, step = make()
    tf2.replay(long, step, model=model).save(str(tmp_path / "actual.h5"))
    assert main(["diff", long, str(tmp_path / "actual.h5")]) == 1
    assert "or run tracekit check GOLDEN MODULE:FUNCTION" in capsys.readouterr().out
    # the API's plain check says it first: the report's line after the verdict
    model, step = make()
    plain = tf2.check(long, step, model=model)
    second = plain.report().splitlines()[1]
    assert not plain.ok and second.startswith("advice: a golden of %d steps, judged plain" % (LONG_GOLDEN + 1))
    assert "pass make_port=" in second and plain.to_dict()["advice"] == second[len("advice: "):]


def test_the_html_report_shows_both_views(tf2, goldens, tmp_path):
    pytest.importorskip("matplotlib", reason="the HTML report needs matplotlib (tracekit[report])")
    result = tf2.check(goldens("golden", 2), make_port=functools.partial(make, "port"), judge="local")
    page = open(result.write_html(str(tmp_path / "judged.html")), encoding="utf-8").read()
    assert "Verdict on a long golden: the local and the drift view" in page
    assert "layer kink: 1 of 2 elements zero in one precision only" in page and "decided by: both views" in page


def test_steps_accepted_by_two_judgments_stay_accepted(tmp_path):
    # The drift view accepts the explained discontinuities' steps, then (after a crossing of the
    # port's own) every step from the crossing on: the first judgment's steps stay accepted.
    from tracekit.comparison.accepted import accept
    from ..support.lifecycle import bump, legacy_golden, replayed

    golden = legacy_golden(str(tmp_path / "g.h5"), steps=6)
    moved = lambda k, key, value: bump(1, "var/w:0")(k, key, value) if k in (1, 4) else value  # noqa: E731
    result = tracekit.compare(golden, replayed(str(tmp_path / "a.h5"), steps=6, change=moved), tracekit.Tolerance())
    assert (result.first_divergence.step, result.first_divergence.key) == (1, "var/w:0")
    accept(result, {1})
    assert result.first_divergence.step == 4 and not result.ok
    accept(result, set(range(4, 6)))
    tensor, = [t for t in result.tensors if t.key == "var/w:0"]
    assert result.ok and (tensor.failed_steps, tensor.accepted_steps, tensor.first_failed) == (0, 2, None)


def test_drift_outside_between_samples_is_found_at_its_first_step(tmp_path, monkeypatch):
    # The drift view's runs keep every tensor on the first DRIFT_EVERY steps and every DRIFT_EVERY-th
    # after; drift that leaves the envelope at step 14 is seen at the sample of step 20, and the run
    # again in full over steps 10-20 finds step 14, where the crossing check then starts.
    import numpy as np

    from tracekit.comparison.arbiter import PORT, Arbitrated, Arbitration
    from tracekit.comparison.result import Comparison
    from tracekit.tf2 import crossing, verdict
    from ..support import build_golden
    from ..support.lifecycle import LEGACY_META

    steps, departs = 30, 14
    rng = np.random.RandomState(0)
    truth = [rng.randn(64).astype(np.float32) for _ in range(steps)]

    def values(k, shift, noise, full):
        out = {"loss/loss": np.float32(1.0 / (k + 1))}
        if full:
            out["var/w:0"] = (truth[k] + shift + noise.randn(64) * 1e-7 * np.abs(truth[k]).max()).astype(np.float32)
        return out

    golden = build_golden(str(tmp_path / "g.h5"), (values(k, 0, np.random.RandomState(0), True) for k in range(steps)),
                          {"var/w:0": np.zeros(64, np.float32)}, meta=dict(LEGACY_META))
    runs = []

    def replay(seed, path, restarts, full_at, count):
        runs.append([k for k in range(count or steps) if full_at(k)])
        noise = np.random.RandomState(1 if seed is None else seed + 2)
        return tracekit.open(build_golden(path, (values(k, 1e-3 * max(k - departs + 1, 0), noise, full_at(k))
                                                 for k in range(count or steps)), {"var/w:0": np.zeros(64, np.float32)},
                                          meta={"replay": {"golden": golden, "steps": count or steps}}))
    def against(seed, own, restarts, full_at):
        with replay(seed, str(tmp_path / ("nudged-%d.h5" % seed)), restarts, full_at, None) as nudged:
            return tracekit.compare(own, nudged, tracekit.Tolerance.exact())
    crossings = []
    monkeypatch.setattr(crossing, "crossed", lambda golden, own, step, *a: crossings.append(step) or Arbitration(step, PORT))
    port = verdict.PortRuns(check=None, replay=replay, against=against, replay_one=None, make_port=None)
    with tracekit.open(golden) as trace:
        drift = verdict.envelope(trace, port, Arbitrated(), Comparison)
    sampled = list(range(10)) + [10, 20, steps - 1]  # and the last step, where a slip of the last band shows
    assert runs[:3] == [sampled] * 3 and runs[3] == list(range(10, 21))  # own, two nudged, then the window
    assert not drift.ok and (drift.first_divergence.step, drift.first_divergence.key) == (departs, "var/w:0")
    assert crossings == [departs, departs - 1, departs - 2]
    assert any("first outside the envelope at step %d" % departs in note for note in drift.notes)


def test_drift_inside_the_first_replays_envelope_makes_no_second_replay(tmp_path):
    # The envelope can only widen with another replay (tests/comparison/test_calibration.py), so a
    # port inside the first one's is inside any: the verdict of both, at the cost of one.
    import numpy as np

    from tracekit.comparison.arbiter import Arbitrated
    from tracekit.comparison.result import Comparison
    from tracekit.tf2 import verdict
    from ..support import build_golden
    from ..support.lifecycle import LEGACY_META

    steps = 30
    truth = [np.random.RandomState(k).randn(64).astype(np.float32) for k in range(steps)]

    def values(k, noise, full):
        out = {"loss/loss": np.float32(1.0 / (k + 1))}
        if full:
            out["var/w:0"] = (truth[k] + noise.randn(64) * 1e-7 * np.abs(truth[k]).max()).astype(np.float32)
        return out

    golden = build_golden(str(tmp_path / "g.h5"), (values(k, np.random.RandomState(0), True) for k in range(steps)),
                          {"var/w:0": np.zeros(64, np.float32)}, meta=dict(LEGACY_META))
    made = []

    def replay(seed, path, restarts, full_at, count):
        made.append(seed)
        noise = np.random.RandomState(1 if seed is None else seed + 2)
        return tracekit.open(build_golden(path, (values(k, noise, full_at(k)) for k in range(count or steps)),
                                          {"var/w:0": np.zeros(64, np.float32)},
                                          meta={"replay": {"golden": golden, "steps": count or steps}}))

    def against(seed, own, restarts, full_at):
        with replay(seed, str(tmp_path / ("nudged-%d.h5" % seed)), restarts, full_at, None) as nudged:
            return tracekit.compare(own, nudged, tracekit.Tolerance.exact())
    port = verdict.PortRuns(check=None, replay=replay, against=against, replay_one=None, make_port=None)
    with tracekit.open(golden) as trace:
        drift = verdict.envelope(trace, port, Arbitrated(), Comparison)
    assert drift.ok and made == [None, 0]  # the own run and one perturbed replay
    assert any("drift envelope: 1 replay (of up to %d" % verdict.ENVELOPE_RUNS in note for note in drift.notes)


@pytest.mark.parametrize("digested", [False, True])
def test_a_learning_rate_outside_is_no_crossing(tmp_path, monkeypatch, digested):
    # A rate is compared exactly and no trajectory's crossing changes it: the drift that departs
    # on it fails at its step with no crossing sought (on BERT-base each search builds the port
    # in float32 and float64).
    import numpy as np

    from tracekit.comparison.arbiter import Arbitrated
    from tracekit.comparison.result import Comparison
    from tracekit.tf2 import crossing, verdict
    from ..support import build_golden
    from ..support.lifecycle import LEGACY_META

    steps, late = 30, 14

    def values(k, lr, full):
        out = {"loss/loss": np.float32(1.0 / (k + 1)), "lr/learning_rate": np.float32(lr)}
        if full:
            out["var/w:0"] = np.full(64, 1.0 / (k + 1), np.float32)
        return out

    golden = build_golden(str(tmp_path / "g.h5"), (values(k, 0.1 / (k + 1), True) for k in range(steps)),
                          {"var/w:0": np.zeros(64, np.float32)}, meta=dict(LEGACY_META))

    def replay(seed, path, restarts, full_at, count):
        return tracekit.open(build_golden(path, (values(k, 0.1 / (k + (0 if k >= late else 1)), full_at(k))
                                                 for k in range(count or steps)), {"var/w:0": np.zeros(64, np.float32)},
                                          meta={"replay": {"golden": golden, "steps": count or steps}}))

    def against(seed, own, restarts, full_at):
        with replay(seed, str(tmp_path / ("nudged-%d.h5" % seed)), restarts, full_at, None) as nudged:
            return tracekit.compare(own, nudged, tracekit.Tolerance.exact())
    crossings = []
    monkeypatch.setattr(crossing, "crossed", lambda golden, own, step, *a: crossings.append(step))
    port = verdict.PortRuns(check=None, replay=replay, against=against, replay_one=None, make_port=None)
    with tracekit.open(golden) as trace:
        drift = verdict.envelope(trace, port, Arbitrated(), Comparison, digested=digested)
    assert not drift.ok and (drift.first_divergence.step, drift.first_divergence.key) == (late, "lr/learning_rate")
    assert crossings == []


def test_a_keyframed_goldens_crossing_is_sought_where_the_error_jumped_and_judged_again_after_the_restart(
        tmp_path, monkeypatch):
    # A golden kept as keyframes: the port's own run is compared at the sampled steps and the last
    # (0-9, 10, 20, 29) and restarts from the golden's state at the steps after the keyframes (1
    # and 21 here). Its error jumps at step 5 (a crossing, which the mocked arbiter confirms there
    # alone) and grows out of the envelope at step 9: the run again, compared at every step since
    # its restart at 1, finds the jump; the steps searched are 9, 8, 7 and the jump at 5, from a
    # run kept whole at those steps and the ones before; the drift is then not judged over steps
    # 5-20, and a slip after the restart at 21, seen at the last step, is caught at its step.
    import numpy as np

    from tracekit.comparison.arbiter import EXPLAINED, Arbitrated, Arbitration, Flip
    from tracekit.comparison.result import Comparison
    from tracekit.replay.loop import Whole
    from tracekit.tf2 import crossing, verdict
    from ..support import build_golden
    from ..support.lifecycle import LEGACY_META

    steps, jump, slip = 30, 5, 24
    rng = np.random.RandomState(0)
    truth = [rng.randn(64).astype(np.float32) for _ in range(steps)]
    eps = float(np.finfo(np.float32).eps)

    def shift(k):
        if jump <= k < 21:  # gone at the restart from the golden's state
            return 200 * 2.0 ** (k - jump) * eps * np.abs(truth[k]).max()
        return 1e-3 if k >= slip else 0.0

    def values(k, moved, noise, full):
        out = {"loss/loss": np.float32(1.0 / (k + 1))}
        if full:
            out["var/w:0"] = (truth[k] + moved + noise.randn(64) * 1e-7 * np.abs(truth[k]).max()).astype(np.float32)
        return out

    golden = build_golden(str(tmp_path / "g.h5"), (values(k, 0, np.random.RandomState(0), True) for k in range(steps)),
                          {"var/w:0": np.zeros(64, np.float32)}, meta=dict(LEGACY_META))
    windows = []

    def replay(seed, path, restarts, full_at, count):
        assert restarts == frozenset({1, 21})
        if seed is None and count is not None:
            windows.append((isinstance(full_at, Whole), [k for k in range(count) if full_at(k)]))
        noise = np.random.RandomState(1 if seed is None else seed + 2)
        full = (lambda k: True) if full_at is None else full_at
        return tracekit.open(build_golden(path, (values(k, shift(k), noise, full(k))
                                                 for k in range(count or steps)), {"var/w:0": np.zeros(64, np.float32)},
                                          meta={"replay": {"golden": golden, "steps": count or steps}}))

    def against(seed, own, restarts, full_at):
        with replay(seed, str(tmp_path / ("nudged-%d.h5" % seed)), restarts, full_at, None) as nudged:
            return tracekit.compare(own, nudged, tracekit.Tolerance.exact())
    flip = Flip("dense", "zero", 1, 64, ((3,),), 0.5)
    crossings = []
    # float32 and float64 apart from the run's own state at every step searched, a layer deciding otherwise at the jump
    monkeypatch.setattr(crossing, "crossed", lambda golden, own, step, *a: crossings.append(step) or Arbitration(
        step, EXPLAINED, flips=(flip,) if step == jump else (), side="port"))
    port = verdict.PortRuns(check=None, replay=replay, against=against, replay_one=None, make_port=None)
    with tracekit.open(golden) as trace:
        drift = verdict.envelope(trace, port, Arbitrated(), Comparison, restarts=frozenset({1, 21}), digested=True)
    assert windows[0] == (False, list(range(1, 10)))  # compared at every step since the restart at 1
    assert windows[1] == (True, [4, 5, 6, 7, 8, 9])  # whole at the steps searched (9, 8, 7, 5) and each one before
    assert windows[2][0] is False and windows[2][1] == list(range(21, steps))  # after the restart at 21
    assert crossings[:4] == [9, 8, 7, jump]
    assert any("not judged over steps 5-20" in note for note in drift.notes), drift.notes
    assert not drift.ok and (drift.first_divergence.step, drift.first_divergence.key) == (slip, "var/w:0")
    assert crossings[4:] == [slip, slip - 1, slip - 2]  # searched again after the restart: no flip there
    assert [a.step for a in drift.arbitration.explained] == [jump]
