"""Results for machines and narrow views: Comparison.to_dict() as strict JSON, `tracekit diff
--json`, the filters --kind/--name/--step, tables that fit the terminal, readable reprs."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tracekit
from tracekit.cli import main
from tracekit.comparison.select import Selection, parse_steps
from tracekit.errors import UsageError
from tracekit.report.text import elide, table

from .test_compare import STEPS, write


@pytest.fixture
def pair(tmp_path):
    """A golden and a replay whose layer2 tap is off from step 2 on, and whose bias gradient
    differs where the golden is zero (no rtol passes that: an inf in the statistics)."""
    golden = write(str(tmp_path / "golden.h5"), bias_grad=0.0)

    def change(step, key, value):
        if key == "tap/layer2" and step >= 2:
            return value + np.float32(0.5)
        if key == "grad/dense/bias:0" and step == 3:
            return value + np.float32(1e-3)
        return value
    return golden, write(str(tmp_path / "actual.h5"), change=change, bias_grad=0.0)


def test_to_dict_is_strict_json_with_everything_a_report_needs(pair):
    golden, actual = pair
    result = tracekit.compare(golden, actual)
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))  # no NaN/Infinity tokens
    assert data["schema"] == 1 and data["ok"] is False and data["verdict"] == "MISMATCH"
    first = data["first_divergence"]
    assert (first["step"], first["key"]) == (2, "tap/layer2")
    index = tuple(first["stats"]["worst_index"])
    golden_value = np.ones((2, 2), "f4")[index] * 2
    assert first["golden_at_worst"] == golden_value and first["actual_at_worst"] == golden_value + 0.5
    tensors = {t["key"]: t for t in data["tensors"]}
    tap = tensors["tap/layer2"]
    assert tap["failed_steps"] == STEPS - 2 and tap["first_failed"] == 2
    assert tap["by_step"]["step"] == list(range(STEPS)) and tap["by_step"]["ok"] == [True, True, False, False]
    assert tap["by_step"]["max_abs"][2] == pytest.approx(0.5)
    bias = tensors["grad/dense/bias:0"]
    assert bias["worst"]["needed_rtol"] == "inf"  # a difference at a golden zero: written as a string
    assert data["environment_diff"]["changes"] is not None and data["profile"]["name"] == "default"
    assert "by_step" not in result.to_dict(by_step=False)["tensors"][0]


def test_a_selection_narrows_the_view_not_the_verdict(pair):
    golden, actual = pair
    result = tracekit.compare(golden, actual)
    early = result.to_dict(selection=Selection(kinds=("tap",), steps=(0, 2)))
    assert early["ok"] is False and early["first_divergence"]["key"] == "tap/layer2"  # still the whole run's
    assert {t["key"] for t in early["tensors"]} == {"tap/layer1", "tap/layer2"}
    layer2 = [t for t in early["tensors"] if t["key"] == "tap/layer2"][0]
    assert layer2["by_step"]["step"] == [0, 1] and layer2["worst"]["ok"] is True
    assert early["selection"] == "kind tap, steps 0:2"
    named = result.to_dict(selection=Selection(name="dense/*"))
    assert {t["key"] for t in named["tensors"]} == {"grad/dense/kernel:0", "grad/dense/bias:0", "var/dense/kernel:0",
                                                   "var/dense/bias:0"}
    text = result.report(Selection(kinds=("grad",)))
    assert "first divergence: step 2, tap/layer2" in text  # the whole run's
    table_rows = text.split("(worst step of each, showing kind grad):")[1].split("\n\n")[0].strip().splitlines()[2:]
    assert [row.split()[:2] for row in table_rows] == [["grad", "dense/bias:0"]]


@pytest.mark.parametrize("text, steps", [("5", (5, 6)), ("3:10", (3, 10)), ("3:", (3, None)), (":4", (None, 4)),
                                         ("initial", (-1, 0))])
def test_step_ranges(text, steps):
    assert parse_steps(text) == steps


def test_bad_filters_are_usage_errors(pair, capsys):
    with pytest.raises(UsageError, match="bad step"):
        parse_steps("two")
    golden, actual = pair
    assert main(["diff", golden, actual, "--step", "x:3"]) == 2
    assert main(["diff", golden, actual, "--kind", "weights"]) == 2
    assert "weights" in capsys.readouterr().err


def test_diff_json_and_filters_on_the_command_line(pair, capsys):
    golden, actual = pair
    assert main(["diff", golden, actual, "--json", "--kind", "loss", "--no-steps"]) == 1  # the verdict's exit code
    data = json.loads(capsys.readouterr().out)
    assert [t["key"] for t in data["tensors"]] == ["loss/loss"] and "by_step" not in data["tensors"][0]
    assert main(["diff", golden, golden, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "MATCH"
    assert main(["diff", golden, actual, "--name", "layer*", "--step", "3"]) == 1
    out = capsys.readouterr().out
    assert "showing name layer*, step 3" in out and "at [" in out  # the values at the worst index


def test_tables_fit_a_width_by_eliding_names():
    long = "resnet/block%d/unit_1/bottleneck_v1/conv%d/BatchNorm/moving_variance:0"
    rows = [["var", long % (i, i), "ok", "1.5e-07"] for i in range(3)]
    lines = table(["kind", "name", "result", "max abs"], rows, right=(3,), width=60)
    assert max(len(line) for line in lines) <= 60
    assert lines[2].split()[1].startswith("resnet/bl") and lines[2].split()[1].endswith("variance:0")
    assert len({line.split()[1] for line in lines[2:]}) == 3  # still told apart
    assert table(["kind", "name"], rows[:1])[2].split()[1] == long % (0, 0)  # no width: whole
    assert elide("abcdefghij", 7) == "ab...ij"


def test_reprs_are_readable(pair):
    golden, actual = pair
    result = tracekit.compare(golden, actual)
    text = repr(result)
    assert text.startswith("<Reported MISMATCH:") and "first divergence at step 2, tap/layer2" in text
    assert len(text) < 400
    tensor = repr(result.tensor("tap", "layer2"))
    assert tensor.startswith("<TensorResult tap/layer2: FAIL, 2 of 4 steps failed, first at step 2")
    tolerance = repr(tracekit.Tolerance().rule(kind="loss", steps=(0, 10), atol=1e-5))
    assert "Rule(kind='loss', steps=[0, 10], atol=1e-05)" in tolerance


def test_a_result_keeps_a_sample_of_a_large_diverging_tensor(tmp_path):
    from tracekit.comparison.diagnosis import VALUE_SAMPLE

    from ..support import build_golden

    big = np.arange(3 * VALUE_SAMPLE, dtype="f4").reshape(300, -1)

    def steps():
        yield {"var/w:0": big}
    golden = build_golden(str(tmp_path / "g.h5"), steps())
    bumped = big.copy()
    bumped[123, 45] += 1000
    actual = build_golden(str(tmp_path / "a.h5"), steps(), change=lambda k, key, v: bumped)
    first = tracekit.compare(golden, actual).first_divergence
    assert first.stats.worst_index == (123, 45)
    assert (first.golden_at_worst, first.actual_at_worst) == (float(big[123, 45]), float(bumped[123, 45]))
    assert first.golden_value.size <= VALUE_SAMPLE and first.golden_value.shape == first.actual_value.shape
