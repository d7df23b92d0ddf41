"""Digests made by TensorFlow where the values are (record/graph_digests.py), held against the
digest numpy makes of the same value (store/digest.py): the sample and the NaN and Inf counts the
same, min and max equal, and each sum within the round-off the digest states. Adversarial values
included: a large offset (the sum cancels), a few huge values among small ones, squares beyond
float32, NaN and Inf, nothing finite, a length no row divides. In both worlds: TF 1.15 records."""

from __future__ import annotations

import numpy as np
import pytest

from tracekit.digest_ops import BLOCK, SMALLEST
from tracekit.record.graph_digests import GraphDigests
from tracekit.store import FORMAT_VERSION
from tracekit.store.digest import digest

rs = np.random.RandomState(7)
N = SMALLEST * 3 + 5  # rows of BLOCK, and a tail


def _cases():
    normal = rs.standard_normal(N)
    spiky = normal * 1e-3
    spiky[rs.randint(0, N, 40)] = 1e6
    nans = normal.copy()
    nans[[3, 900, N - 1]] = np.nan
    nans[[17, 18]] = [np.inf, -np.inf]
    return {
        "normal": normal.astype(np.float32).reshape(N, 1),
        "offset": (1e4 + normal).astype(np.float32),  # the sum is 1e4 times its spread
        "cancelling": np.concatenate([normal, -normal]).astype(np.float32),
        "spiky": spiky.astype(np.float32),
        "squares-overflow": (normal * 1e25).astype(np.float32),  # x**2 > float32's largest
        "nonfinite": nans.astype(np.float32),
        "all-nan": np.full(N, np.nan, np.float32),
        "float64": normal * 1e-8,
        "float16": (normal * 10).astype(np.float16),
        "matrix": rs.standard_normal((BLOCK * 3 + 1, 67)).astype(np.float32),
    }


def _check(made, stats, sample, value):
    got = made.digest(stats, sample)
    want = digest(value, crc=False)
    assert got.shape == want.shape and got.dtype == want.dtype and got.count == want.count
    assert got.sample.tobytes() == want.sample.tobytes()
    assert (got.nan, got.inf) == (want.nan, want.inf)
    if want.count - want.nonfinite:
        assert (got.min, got.max, got.maxabs) == (want.min, want.max, want.maxabs)
        assert abs(got.sum - want.sum) <= got.roundoff * want.sumabs, (got.sum, want.sum, got.roundoff)
        assert abs(got.sumsq - want.sumsq) <= got.roundoff * want.sumsq, (got.sumsq, want.sumsq, got.roundoff)
        assert want.sumabs <= got.l1 * (1 + 1e-12)  # the bound that stands in for sum |x|
    else:
        assert np.isnan(got.min) and np.isnan(got.max) and got.sum == 0
    assert np.isnan(got.sumabs) and got.crc is None and 0 < got.roundoff < 1e-4
    return got


def test_the_graph_s_digest_is_numpy_s_within_the_round_off_it_states(tf, graph):
    cases = _cases()
    tensors = {"grad/" + name: tf.constant(value) for name, value in cases.items()}
    cases = {"grad/" + name: value for name, value in cases.items()}
    digests = GraphDigests(tf, graph)
    fetches, made = digests.swap(tensors)
    assert set(made) == set(cases) and digests.unusable is None
    with tf.compat.v1.Session(graph=graph) as sess:
        values = sess.run(fetches)
    for name, value in cases.items():
        got = _check(made[name], *values[name], value)
        careful = not np.all(np.isfinite(value)) or name.endswith("squares-overflow")
        # the careful branch (float64 over the finite elements) states float64's round-off instead
        assert (got.roundoff != made[name].roundoff) == careful, (name, got.roundoff)


def test_what_is_not_digested_there_is_fetched(tf, graph):
    v1 = tf.compat.v1
    large = np.ones(N, np.float32)
    tensors = {"grad/small": tf.constant(np.ones(SMALLEST - 1, np.float32)),
               "grad/integers": tf.constant(np.arange(N, dtype=np.int64)),
               "tap/unknown": v1.placeholder(tf.float32, [None, 64]),
               # kept whole at every step, however large
               "random/dropout": tf.constant(large), "input/x": tf.constant(large), "loss/loss": tf.constant(large)}
    fetches, made = GraphDigests(tf, graph).swap(tensors)
    assert made == {} and fetches == tensors


def test_a_variable_is_digested_as_it_is_when_read_and_a_finalized_graph_stays_so(tf, graph):
    v1 = tf.compat.v1
    start = rs.standard_normal((256, 128)).astype(np.float32)
    variable = v1.get_variable("w", initializer=start)
    step = v1.assign_add(variable, tf.ones_like(variable))
    init = v1.global_variables_initializer()
    graph.finalize()
    digests = GraphDigests(tf, graph)
    with v1.Session(graph=graph) as sess:
        sess.run(init)
        sess.run(step)
        (key, held, got), = digests.read(sess, lambda s, fetches: s.run(fetches), [("var/w:0", variable)])
        assert graph.finalized and key == "var/w:0" and held is variable
        want = digest(start + 1, crc=False)
        assert got.sample.tobytes() == want.sample.tobytes() and abs(got.sum - want.sum) <= got.roundoff * want.sumabs
        before = len(graph.get_operations())
        digests.read(sess, lambda s, fetches: s.run(fetches), [("var/w:0", variable)])
        assert len(graph.get_operations()) == before  # made once


@pytest.mark.parametrize("scale", [1.0, 1e-30, 1e30])
def test_the_stated_round_off_holds_on_random_tensors(tf, graph, scale):
    values = [(rs.standard_normal(n) * scale + rs.uniform(-3, 3) * scale).astype(np.float32)
              for n in rs.randint(SMALLEST, 5 * SMALLEST, 8)]
    fetches, made = GraphDigests(tf, graph).swap({"var/%d" % i: tf.constant(v) for i, v in enumerate(values)})
    with tf.compat.v1.Session(graph=graph) as sess:
        got = sess.run(fetches)
    for i, value in enumerate(values):
        _check(made["var/%d" % i], *got["var/%d" % i], value)


# ---- a recording that makes them ------------------------------------------------------------------

SLIPS = [("grad/dense_1/kernel:0", 7, 1 + 1e-3), ("var/dense/kernel:0", 8, 1 + 1e-4),
         ("slot/dense_1/kernel/Adam:0", 6, 1.5)]  # Adam's moments are small: the default atol (1e-5) holds them


@pytest.fixture(scope="module")
def recorded(legacy_python, tmp_path_factory):
    """The same TF 1.15 program recorded whole at every step, and with keyframes every 5 steps."""
    from ..support import ROOT, run_python
    import os
    folder = tmp_path_factory.mktemp("graph-digests")
    script = os.path.join(ROOT, "tests", "record", "scripts", "wide_monitored.py")
    paths = {}
    for name, options in (("whole", []), ("keyframes", ["--every", "5"])):
        paths[name] = str(folder / (name + ".h5"))
        run_python(legacy_python, ["-m", "tracekit", "record", "-o", paths[name]] + options + ["--", script])
    return paths


def _slipped(path, out, key, at, factor):
    """The trace at `path` again with `key` scaled by `factor` from step `at` on."""
    import tracekit
    with tracekit.open(path) as trace:
        with tracekit.create(out, meta={k: trace.meta[k] for k in ("slots", "replay") if k in trace.meta}) as writer:
            with writer.initial():
                for name in trace.initial:
                    writer.add(*name.split("/", 1), value=trace.initial[name])
            for step in trace:
                with writer.step():
                    for name in step:
                        value = step[name]
                        writer.add(*name.split("/", 1), value=value * np.float32(factor)
                                   if name == key and step.index >= at else value)
    return out


@pytest.mark.modern
def test_a_recording_digests_in_the_graph_between_keyframes_once_its_audit_is_done(recorded):
    import tracekit
    from tracekit.record.witness import AUDIT_STEPS
    from tracekit.report.trace import show
    with tracekit.open(recorded["keyframes"]) as golden:
        made = {step.index: sorted(k for k, d in step.digests.items() if d.roundoff) for step in golden}
        # keyframes every 5 steps (the last is not known: no --steps), whole until the audit is done
        assert [i for i in made if made[i]] == [i for i in range(AUDIT_STEPS, 12) if i % 5]
        # the kernels of 64 x 512 and 512 x 512, their gradients and Adam's two slots each
        assert len(made[AUDIT_STEPS]) == 8 and "grad/dense_1/kernel:0" in made[AUDIT_STEPS]
        assert golden.format_version == FORMAT_VERSION
        assert "digests   at step 11: 8 made in the graph" in show(golden)  # tracekit show says how
    assert tracekit.verify(recorded["keyframes"]).ok


@pytest.mark.modern
def test_the_same_run_matches_its_graph_digests_and_a_slip_is_found_at_its_step(recorded, tmp_path):
    import tracekit
    result = tracekit.compare(recorded["keyframes"], recorded["whole"])
    assert result.ok, result.report()
    for key, at, factor in SLIPS:
        slipped = _slipped(recorded["whole"], str(tmp_path / ("%d.h5" % at)), key, at, factor)
        first = tracekit.compare(recorded["keyframes"], slipped).first_divergence
        assert first is not None and (first.step, first.key) == (at, key), (key, first)
        assert first.stats.basis == "digest"


def test_a_digest_made_in_the_graph_that_disagrees_with_numpy_s_ends_them(tf, graph, monkeypatch):
    import dataclasses

    from tracekit.record import graph_digests

    original = graph_digests.digest_ops

    def claiming_no_roundoff(tf, tensor, careful=True):  # float32 sums claimed exact: numpy's float64 ones disagree
        made = original(tf, tensor, careful)
        return None if made is None else dataclasses.replace(made, roundoff=0.0)

    monkeypatch.setattr(graph_digests, "digest_ops", claiming_no_roundoff)
    v1 = tf.compat.v1
    # each row of 128 a 1e4 and small values float32 cannot add to it: a float64 sum differs
    rows = np.random.RandomState(0).uniform(1e-4, 2e-4, (256, 128))
    rows[:, 0] = 1e4
    variables = [("var/w%d:0" % i, v1.get_variable("w%d" % i, initializer=np.roll(rows, i).astype(np.float32)))
                 for i in range(2)]
    digests = GraphDigests(tf, graph)
    with v1.Session(graph=graph) as sess:
        sess.run(v1.global_variables_initializer())
        read = digests.read(sess, lambda s, fetches: s.run(fetches), variables)
    assert all(isinstance(value, np.ndarray) for _, _, value in read), (digests.unusable, read)  # values
    assert digests.unusable.startswith("var/w0:0: its sum ") and "beyond the round-off it states" in digests.unusable
    assert digests.swap(dict(variables)) == (dict(variables), {})


def test_a_variable_whose_quick_digest_cannot_stand_is_read_again_whole(tf, graph):
    v1 = tf.compat.v1
    values = {"var/nan:0": np.where(np.arange(N) == 5, np.nan, 1.0), "var/tiny:0": np.full(N, 1e-30),
              "var/zero:0": np.zeros(N), "var/plain:0": np.ones(N)}
    variables = [(key, v1.get_variable(key[4:-2], initializer=value.astype(np.float32))) for key, value in values.items()]
    with v1.Session(graph=graph) as sess:
        sess.run(v1.global_variables_initializer())
        read = {key: value for key, _, value in GraphDigests(tf, graph).read(sess, lambda s, f: s.run(f), variables)}
    # a NaN and squares that underflow: the value; zeros and ones: digests made in the graph, exact
    assert isinstance(read["var/nan:0"], np.ndarray) and isinstance(read["var/tiny:0"], np.ndarray)
    assert read["var/zero:0"].sumsq == 0 and read["var/plain:0"].sum == N and read["var/plain:0"].roundoff > 0
