"""tracekit.compare on whole traces: data-flow order, first divergence, missing tensors,
noise-floor gradients, the report and the assertion; `tracekit diff` on files."""

from __future__ import annotations

import collections

import h5py
import numpy as np
import pytest

import tracekit
from tracekit.cli import main
from tracekit.report.comparison import headline

from ..support import build_golden

STEPS = 4


def write(path, change=None, drop=(), meta=None, steps=STEPS, bias_grad=None):
    """A synthetic trace; change(step, key, value) -> value perturbs the 'actual' one."""
    rng = np.random.RandomState(0)
    w0 = rng.randn(3, 2).astype("f4")

    def training():
        for k in range(steps):
            yield collections.OrderedDict([
                ("input/x:0", np.full((2, 3), k, "f4")),
                ("random/dropout/RandomUniform:0", rng.rand(2, 2).astype("f4")),
                ("tap/layer1", np.arange(4, dtype="f4").reshape(2, 2) + k),
                ("tap/layer2", np.ones((2, 2), "f4") * k),
                ("fetch/fetches", [None, np.float32(k)]),
                ("loss/loss", np.float32(1.0 / (k + 1))),
                ("lr/learning_rate", np.float32(0.1)),
                ("grad/dense/kernel:0", np.full((3, 2), 0.5, "f4")),
                ("grad/dense/bias:0", np.full(2, 0.5 if bias_grad is None else bias_grad, "f4")),
                ("var/dense/kernel:0", w0 - 0.05 * (k + 1)),
                ("var/dense/bias:0", np.full(2, -0.05 * (k + 1), "f4")),
            ])
    initial = {"var/dense/kernel:0": w0, "var/dense/bias:0": np.zeros(2, "f4")}
    return build_golden(path, training(), initial, meta=meta, change=change, drop=drop)


@pytest.fixture
def golden(tmp_path):
    return write(str(tmp_path / "golden.h5"))


def test_identical_traces_match(golden, tmp_path):
    actual = write(str(tmp_path / "actual.h5"))
    result = tracekit.compare(golden, actual)
    assert result.ok and bool(result) and result.first_divergence is None
    assert result.steps == STEPS and not result.missing
    assert [t.key for t in result.tensors][:3] == ["var/dense/kernel:0", "var/dense/bias:0", "input/x:0"]
    assert result.not_compared == {"fetch/fetches": "not replayed (fetch)"}
    assert "MATCH" in result.report()
    result.assert_ok()


@pytest.mark.parametrize("step, key, expect", [
    (2, "tap/layer2", (2, "tap", "layer2")),
    (1, "var/dense/bias:0", (1, "var", "dense/bias:0")),
    (0, "lr/learning_rate", (0, "lr", "learning_rate")),
    (3, "random/dropout/RandomUniform:0", (3, "random", "dropout/RandomUniform:0")),
])
def test_first_divergence_is_the_earliest_step_then_stage(golden, tmp_path, step, key, expect):
    def change(k, name, value):
        if k >= step and name in (key, "var/dense/kernel:0" if k > step else None):  # later damage too
            return value + np.float32(0.5)
        return value
    actual = write(str(tmp_path / "actual.h5"), change=change)
    result = tracekit.compare(golden, actual)
    d = result.first_divergence
    assert not result.ok and (d.step, d.kind, d.name) == expect
    assert d.stats.mismatched > 0 and d.stats.max_abs == pytest.approx(0.5, rel=1e-3)
    text = result.report()
    assert "first divergence: step %d, %s" % (step, key) in text and "would pass with atol >=" in text
    with pytest.raises(tracekit.Mismatch) as err:
        result.assert_ok()
    assert isinstance(err.value, AssertionError) and "first divergence" in str(err.value)


@pytest.mark.parametrize("key", ["grad/dense/kernel:0", "var/dense/bias:0"])
def test_a_measurement_gives_the_same_statistics_and_keeps_no_values(golden, tmp_path, key):
    # diagnose=False (the arbiter's one-step runs, the envelope's perturbed ones): the same numbers
    # and verdicts; no cause sought, so a failing tensor's values are kept only where the noise
    # tracker reads them (a variable's), and a gradient's first divergence carries none
    from tracekit.comparison.engine import compare_data

    actual = write(str(tmp_path / "actual.h5"), change=lambda k, name, v: v + np.float32(0.5) if name == key else v)
    judged, measured = compare_data(golden, actual), compare_data(golden, actual, diagnose=False)
    assert [(t.key, {k: s.to_dict() for k, s in t.by_step.items()}) for t in judged.tensors] == \
        [(t.key, {k: s.to_dict() for k, s in t.by_step.items()}) for t in measured.tensors]
    first, bare = judged.first_divergence, measured.first_divergence
    assert (first.step, first.key) == (bare.step, bare.key) == (0, key)
    assert first.golden_value is not None
    if key.startswith("grad/"):
        assert bare.golden_value is None and bare.golden_at_worst is None
    else:
        assert np.array_equal(bare.golden_value, first.golden_value)


def test_taps_are_compared_in_recorded_order(golden, tmp_path):
    bump = {"tap/layer1", "tap/layer2"}
    actual = write(str(tmp_path / "actual.h5"), change=lambda k, key, v: v + 1 if key in bump else v)
    assert tracekit.compare(golden, actual).first_divergence.name == "layer1"


def test_missing_and_not_replayed(golden, tmp_path):
    meta = {"replay": {"not_replayed": {"grad/dense/bias:0": "no counterpart in TF2"}}}
    actual = write(str(tmp_path / "actual.h5"), drop=("tap/layer2", "grad/dense/bias:0"), meta=meta)
    result = tracekit.compare(golden, actual)
    assert not result.ok and result.missing == ["tap/layer2"] and result.first_divergence is None
    assert result.not_compared["grad/dense/bias:0"] == "no counterpart in TF2"
    assert "missing from the replay (1): tap/layer2" in result.report()


def test_a_missing_tensor_gets_a_hint_and_a_rule_can_leave_it_out(tmp_path):
    # TF1 Adam's sparse path computes a rate inside its update: a port has no such tensor.
    meta = {"updates": {"dense/kernel:0": {"update": "ApplyAdam", "lr": "Adam/learning_rate:0"}}}
    rate = "lr/Adam/update_embedding/table/truediv:0"
    golden = write(str(tmp_path / "golden.h5"), meta=meta)
    with tracekit.create(str(tmp_path / "g2.h5"), meta=meta) as w:  # the golden, with that rate at each step
        with tracekit.open(golden) as source:
            with w.initial():
                for key, value in source.initial.items():
                    w.add(*key.split("/", 1), value=value)
            for step in source:
                with w.step():
                    for key in step:
                        w.add(*key.split("/", 1), value=step[key])
                    w.add("lr", rate.split("/", 1)[1], value=np.float32(0.05))
    actual = write(str(tmp_path / "actual.h5"))
    result = tracekit.compare(str(tmp_path / "g2.h5"), actual)
    assert not result.ok and result.missing == [rate]
    hint = result.missing_hints[rate]
    assert "made by TF1's op Adam/update_embedding/table/truediv, inside an optimizer's update" in hint
    assert hint in result.report()
    ignore = tracekit.Tolerance().rule(kind="lr", name="Adam/update_*", ignore=True)
    result = tracekit.compare(str(tmp_path / "g2.h5"), actual, ignore)
    assert result.ok and not result.missing
    assert result.not_compared[rate] == "ignored by a tolerance rule (missing from the replay)"
    # a rule for some steps only does not excuse a tensor missing at every step
    assert not tracekit.compare(str(tmp_path / "g2.h5"), actual, tracekit.Tolerance().rule(
        kind="lr", name="Adam/*", steps=(1, None), ignore=True)).ok


def test_tolerance_rules_apply(golden, tmp_path):
    actual = write(str(tmp_path / "actual.h5"),
                   change=lambda k, key, v: v + np.float32(1e-3) if key == "loss/loss" else v)
    assert tracekit.compare(golden, actual).first_divergence.key == "loss/loss"
    loose = tracekit.Tolerance().rule(kind="loss", atol=1e-2)
    assert tracekit.compare(golden, actual, loose).ok
    ignore = tracekit.Tolerance().rule(kind="loss", name="loss", ignore=True)
    result = tracekit.compare(golden, actual, ignore)
    assert result.ok and result.not_compared["loss/loss"] == "ignored by a tolerance rule"


def test_short_replay_fails_unless_limited_on_purpose(golden, tmp_path):
    short = write(str(tmp_path / "short.h5"), steps=2)
    result = tracekit.compare(golden, short)
    assert not result.ok and result.first_divergence is None and result.steps == 2
    assert "the replay is short: the golden has 4 steps, the replay only 2" in result.report()
    empty = write(str(tmp_path / "empty.h5"), steps=0)
    assert not tracekit.compare(golden, empty).ok
    limited = write(str(tmp_path / "limited.h5"), steps=2, meta={"replay": {"limited": True}})  # replay(steps=2)
    result = tracekit.compare(golden, limited)
    assert result.ok and result.steps == 2
    assert "the golden has 4 steps, the replay 2: 2 compared" in result.report()


def test_statistics_per_tensor_and_step(golden, tmp_path):
    actual = write(str(tmp_path / "actual.h5"),
                   change=lambda k, key, v: v + np.float32(k * 1e-3) if key == "tap/layer1" else v)
    tensor = tracekit.compare(golden, actual).tensor("tap", "layer1")
    assert list(tensor.by_step) == list(range(STEPS))
    assert [round(float(s.max_abs), 6) for s in tensor.by_step.values()] == [0, 1e-3, 2e-3, 3e-3]
    assert [s.ok for s in tensor.by_step.values()] == [True, False, False, False]
    assert tensor.worst.to_dict() == tensor.by_step[3].to_dict() and tensor.worst_step == 3 and tensor.first_failed == 1
    assert tensor.by_step[2].mismatched == 4 and tensor.by_step[2].fraction == 1.0


def test_noise_floor_gradient_is_recognized(tmp_path):
    golden = write(str(tmp_path / "g.h5"), bias_grad=1e-9)
    actual = write(str(tmp_path / "a.h5"), bias_grad=1e-9,
                   change=lambda k, key, v: -v if key == "grad/dense/bias:0" else v)
    result = tracekit.compare(golden, actual, tracekit.Tolerance(atol=0, rtol=1e-6))
    d = result.first_divergence
    assert (d.kind, d.name) == ("grad", "dense/bias:0") and d.noise_floor
    assert result.tensor("grad", "dense/bias:0").noise_floor
    assert "noise floor" in result.report() and "not a porting error" in result.report()
    real = write(str(tmp_path / "r.h5"), change=lambda k, key, v: -v if key == "grad/dense/bias:0" else v)
    assert not tracekit.compare(str(tmp_path / "g.h5"), real).first_divergence.noise_floor


def test_diff_command(golden, tmp_path, capsys):
    same = write(str(tmp_path / "same.h5"))
    assert main(["diff", golden, same]) == 0
    assert capsys.readouterr().out.startswith("MATCH")
    other = write(str(tmp_path / "other.h5"), change=lambda k, key, v: v * 2 if key == "loss/loss" else v)
    assert main(["diff", golden, other]) == 1
    assert "first divergence: step 0, loss/loss" in capsys.readouterr().out
    assert main(["diff", golden, str(tmp_path / "nope.h5")]) == 2
    assert "no trace at" in capsys.readouterr().err


def test_diff_with_tolerance_file(golden, tmp_path, capsys):
    other = write(str(tmp_path / "other.h5"), change=lambda k, key, v: v * 2 if key == "loss/loss" else v)
    policy = tmp_path / "tol.toml"
    policy.write_text('[[rule]]\nkind = "loss"\nrtol = 1.5\n')
    assert main(["diff", golden, other, "--tolerance", str(policy)]) == 0
    policy.write_text("atol = [\n")
    assert main(["diff", golden, other, "--tolerance", str(policy)]) == 2
    assert "is not valid TOML" in capsys.readouterr().err


def test_diff_exact(golden, tmp_path, capsys):
    near = write(str(tmp_path / "near.h5"), change=lambda k, key, v: v + np.float32(1e-7) if key == "loss/loss" else v)
    assert main(["diff", golden, near]) == 0
    assert main(["diff", "--exact", golden, near]) == 1
    assert main(["diff", "--exact", golden, write(str(tmp_path / "same.h5"))]) == 0
    assert main(["diff", "--exact", "--tolerance", "x.toml", golden, near]) == 2
    assert "exclude each other" in capsys.readouterr().err
    assert main(["diff", "--profile", "round-off", golden, near]) == 0  # 1e-7 on a loss of about 1: 1 ulp
    assert "tolerance: round-off (asked for)" in capsys.readouterr().out
    assert main(["diff", "--profile", "exact", golden, near]) == 1


def machine(isa, tf="1.15.5", program="train.py"):
    """Metadata of a recording of `program` on a CPU with these instruction sets."""
    return {"program": {"entry": program, "sha256": "5eed" + program},
            "environment": {"machine": "x86_64", "cpu": "cpu-" + isa[-1], "cpu_isa": list(isa),
                            "cpu_vendor": "GenuineIntel", "cpu_family": "6", "cpu_model": str(len(isa)),
                            "cpu_caches": {"L2": "1024K"}, "env": {}},
            "tensorflow": {"version": tf, "devices": [{"name": "cpu:0", "type": "CPU"}],
                           "threads": {"intra_op": 2, "inter_op": 2}, "xla_jit": "off", "determinism": False,
                           "tf32": False, "gpus": [], "cuda": None, "cudnn": None,
                           "onednn": {"enabled": False, "default": False, "env": None, "max_cpu_isa": None}}}


AVX512 = machine(("avx", "avx2", "fma", "avx512f"))
AVX2 = machine(("avx", "avx2", "fma"))


def roundoff(ulps):
    """change(): every float tensor off by `ulps` float32 ulps of its own scale (max |value|)."""
    def change(k, key, value):
        if key.startswith(("input/", "random/", "fetch/")):
            return value
        arr = np.asarray(value, dtype=np.float32)
        return (arr + np.float32(ulps * 2.0 ** -23 * np.abs(arr).max())).astype(np.float32)
    return change


def test_the_environments_pick_the_tolerance(tmp_path):
    golden = write(str(tmp_path / "g.h5"), meta=AVX512)
    same = tracekit.compare(golden, write(str(tmp_path / "same.h5"), meta=AVX512))
    assert same.ok and same.profile.name == "exact" and same.report().startswith("MATCH (bit for bit)")
    near = write(str(tmp_path / "near.h5"), meta=AVX512, change=roundoff(4))
    assert tracekit.compare(golden, near).profile.name == "exact"
    assert not tracekit.compare(golden, near).ok  # one machine: even round-off is a change
    other = tracekit.compare(golden, write(str(tmp_path / "other.h5"), meta=AVX2, change=roundoff(4)))
    assert other.ok and other.profile.name == "round-off"
    assert [c.field for c in other.environment_diff.kernel_changes] == ["cpu model", "cpu instruction sets"]
    first = other.report().splitlines()[0]
    assert first.startswith("MATCH (within round-off; golden recorded on TensorFlow 1.15.5, cpu-avx512f, AVX-512")
    assert "actual on TensorFlow 1.15.5, cpu-fma, AVX2 +FMA" in first
    other_tf = tracekit.compare(golden, write(str(tmp_path / "tf2.h5"), meta=machine(("avx2",), tf="2.21.0")))
    assert other_tf.profile.name == "default" and "TensorFlow 1.15.5 vs 2.21.0" in other_tf.report()
    replay = dict(machine(("avx", "avx2", "fma", "avx512f"), program="step + Model"), replay={"golden": golden})
    port = tracekit.compare(golden, write(str(tmp_path / "port.h5"), meta=replay, change=roundoff(4)))
    assert port.profile.name == "default" and port.ok and "a port compared with its golden" in port.report()
    other_script = machine(("avx", "avx2", "fma", "avx512f"), program="other.py")
    assert tracekit.compare(golden, write(str(tmp_path / "o.h5"), meta=other_script)).profile.name == "default"


def test_roundoff_bound_catches_real_changes_across_machines(tmp_path):
    golden = write(str(tmp_path / "g.h5"), meta=AVX512)
    for key, change in [("loss/loss", 1.001), ("var/dense/kernel:0", 1.0001), ("lr/learning_rate", 1.001)]:
        actual = write(str(tmp_path / "a.h5"), meta=AVX2, change=lambda k, name, v: v * np.float32(change)
                       if name == key else v)
        result = tracekit.compare(golden, actual)
        assert result.profile.name == "round-off" and not result.ok and result.first_divergence.key == key
        assert result.likely_cause is None and "likely cause" not in result.report()
    shifted = write(str(tmp_path / "s.h5"), meta=AVX2,
                    change=lambda k, key, v: v + np.float32(1) if key == "input/x:0" else v)
    assert tracekit.compare(golden, shifted).first_divergence.key == "input/x:0"  # inputs stay exact


def test_report_names_the_machine_as_likely_cause_within_roundoff(tmp_path):
    golden = write(str(tmp_path / "g.h5"), meta=AVX512)
    actual = write(str(tmp_path / "a.h5"), meta=AVX2, change=roundoff(30))
    result = tracekit.compare(golden, actual, tracekit.Tolerance.exact())
    assert not result.ok and result.profile.name == "given"
    cause = result.likely_cause
    assert cause is not None and cause.likely and not cause.port and cause.ulps <= cause.bound
    assert [c.field for c in cause.changes] == ["cpu model", "cpu instruction sets"]
    text = result.report()
    assert "likely cause: the machine, not the code" in text and "AVX-512 +FMA -> AVX2 +FMA" in text
    # The same error on the same machine is not explained away, nor one beyond the bound.
    same_machine = write(str(tmp_path / "m.h5"), meta=AVX512, change=roundoff(30))
    assert tracekit.compare(golden, same_machine, tracekit.Tolerance.exact()).likely_cause is None
    beyond = write(str(tmp_path / "b.h5"), meta=AVX2, change=roundoff(5000))
    assert tracekit.compare(golden, beyond, tracekit.Tolerance.exact()).likely_cause is None
    # A port on another CPU: possible, not likely (a port's own error can be that small).
    port = write(str(tmp_path / "p.h5"), meta=machine(("avx", "avx2", "fma"), tf="2.21.0"), change=roundoff(30))
    port_result = tracekit.compare(golden, port, tracekit.Tolerance.exact())
    assert port_result.likely_cause.port and not port_result.likely_cause.likely
    assert "possible cause: machine round-off" in port_result.report()
    # Traces that do not say which program made them: possible, never likely.
    anonymous = {k: v for k, v in AVX2.items() if k != "program"}
    unsure = write(str(tmp_path / "u.h5"), meta=anonymous, change=roundoff(30))
    unsure_result = tracekit.compare(golden, unsure, tracekit.Tolerance.exact())
    assert not unsure_result.likely_cause.likely and not unsure_result.likely_cause.port
    assert "the traces do not record enough to be sure" in unsure_result.report()


def test_max_errors_are_data_per_kind(tmp_path):
    golden = write(str(tmp_path / "g.h5"))
    actual = write(str(tmp_path / "a.h5"),
                   change=lambda k, key, v: v + np.float32(0.25) if (k, key) == (2, "loss/loss") else v)
    errors = {e.kind: e for e in tracekit.compare(golden, actual).max_errors()}
    # data-flow order of first appearance: the initial variables, then a step's stages (fetches are not compared)
    assert list(errors) == ["var", "input", "random", "tap", "loss", "lr", "grad"]
    assert errors["loss"].tensors == 1 and errors["loss"].max_abs == pytest.approx(0.25)
    assert errors["loss"].max_ulps > 1e5 and errors["grad"].max_abs == 0 and errors["tap"].tensors == 2


@pytest.mark.parametrize("workers", [1, 2])
def test_values_read_ahead_match_and_fail_as_read_in_turn(all_chunked, golden, tmp_path, monkeypatch, workers):
    # Reading ahead on threads gives the serial comparison's results; a damaged value stops it
    # with the error that names the file, the step and the tensor, as a serial read would.
    from tracekit.comparison import engine, pipeline

    monkeypatch.setattr(pipeline, "WORKERS", workers)
    monkeypatch.setattr(engine, "REFRESH_STEPS", 1)  # the files reopened after every step: the same results
    actual = write(str(tmp_path / "actual.h5"), change=lambda k, key, v: v * 1.5 if key == "tap/layer2" else v)
    result = tracekit.compare(golden, actual)
    assert (result.first_divergence.step, result.first_divergence.key) == (1, "tap/layer2")
    assert [t.key for t in result.tensors][2:5] == ["input/x:0", "random/dropout/RandomUniform:0", "tap/layer1"]
    with h5py.File(actual, "r") as f:
        _, payload = f["steps/00000002/var/dense%2Fkernel:0"].id.read_direct_chunk((0, 0))
    with open(actual, "rb") as fh:
        where = fh.read().find(payload)
    with open(actual, "r+b") as fh:  # flip bytes inside that chunk's payload
        fh.seek(where + len(payload) // 2)
        fh.write(b"\xff\x00\xff")
    with pytest.raises(tracekit.CorruptTrace, match=r"actual.h5: step 2, var/dense/kernel:0"):
        tracekit.compare(golden, actual)


def test_a_comparison_of_no_input_and_no_loss_is_no_match(tmp_path):
    # a golden whose steps hold only the update (gradients accumulated by other runs, applied by
    # this one) matches a port that computes nothing but the update: the verdict must say that
    # nothing shows the port ran, and fail
    meta = {"held": {"NoOp_1": {"input": 0, "random": 0, "tap": 0, "loss": 0, "lr": 1, "grad": 2}}}
    drop = ("input/x:0", "loss/loss", "random/dropout/RandomUniform:0", "tap/layer1", "tap/layer2")
    golden = write(str(tmp_path / "golden.h5"), drop=drop, meta=meta)
    actual = write(str(tmp_path / "actual.h5"), drop=drop)
    result = tracekit.compare(golden, actual)
    assert result.first_divergence is None and not result.missing and not result.ok
    assert "no input and no loss was compared" in result.uncompared and "NoOp_1" in result.uncompared
    report = result.report()
    assert report.startswith("MISMATCH") and "NOT A MATCH: no input and no loss was compared" in report
    assert result.to_dict()["uncompared"] == result.uncompared
    assert headline(result).startswith("nothing shows the port ran")
    with pytest.raises(tracekit.Mismatch, match="no input and no loss was compared"):
        result.assert_ok()
    # one loss compared is enough: the port's model ran
    golden = write(str(tmp_path / "golden_loss.h5"), drop=drop[:1] + drop[2:])
    assert tracekit.compare(golden, write(str(tmp_path / "actual_loss.h5"), drop=drop[:1] + drop[2:])).ok
