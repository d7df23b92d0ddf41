"""Tolerance policies: rules by kind, name and steps; defaults by kind and dtype; TOML files."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tracekit.comparison import Tolerance
from tracekit.comparison.tolerance import Rule


def test_defaults_by_dtype_and_kind():
    t = Tolerance()
    r = t.resolve("var", "w", 0, "float32")
    assert (r.atol, r.rtol, r.exact) == (1e-5, 1e-6, False)
    assert t.resolve("var", "w", 0, "bfloat16").atol == 1e-2
    assert t.resolve("var", "w", 0, "float16").rtol == 1e-3
    assert t.resolve("var", "global_step:0", 0, "int64").exact
    assert (t.resolve("lr", "learning_rate", 0, "float32").atol, t.resolve("lr", "x", 0, "float32").rtol) == (0, 1e-6)
    assert (t.resolve("input", "x:0", 0, "float32").atol, t.resolve("random", "r", 0, "float32").rtol) == (0, 0)
    assert Tolerance(atol=0.1).resolve("var", "w", 0, "float32").atol == 0.1


def test_rules_last_match_wins_per_setting():
    t = Tolerance(atol=1e-5).rule(kind="grad", atol=1e-3).rule(name="*/bias:0", rtol=0.5) \
        .rule(kind="grad", name="re:^dense_1/", steps=(2, 4), atol=7.0)
    r = t.resolve("grad", "dense/bias:0", 0, "float32")
    assert (r.atol, r.rtol) == (1e-3, 0.5)
    assert t.resolve("grad", "dense_1/kernel:0", 3, "float32").atol == 7.0
    assert t.resolve("grad", "dense_1/kernel:0", 4, "float32").atol == 1e-3  # stop is exclusive
    assert t.resolve("var", "dense/bias:0", 0, "float32").atol == 1e-5
    assert Tolerance().rule(kind="tap", ignore=True).resolve("tap", "x", 0, "float32").ignore


def test_guide_policy():
    for policy in (Tolerance.guide(), tracekit.Tolerance.guide()):
        early, late = policy.resolve("loss", "loss", 9, "float32"), policy.resolve("loss", "loss", 10, "float32")
        assert (early.atol, early.rtol) == (1e-5, 0) and (late.atol, late.rtol) == (0, 0.05)
        assert policy.resolve("loss", "loss", 10 ** 9, "float32").rtol == 0.05
        assert not policy.equal_nan


def test_open_ended_step_range():
    # TOML has no null: steps = [10] means from step 10 on.
    t = Tolerance.from_dict({"rule": [{"kind": "loss", "steps": [10], "rtol": 0.05}]})
    assert t.resolve("loss", "loss", 9, "float32").rtol == 1e-6 and t.resolve("loss", "loss", 10 ** 6, "float32").rtol == 0.05


@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="weights"), "unknown tensor kind 'weights'"),
    (dict(steps=(1, 2, 3)), "steps must be (start, stop) or (start,)"),
    (dict(name="re:("), "bad name pattern"),
    (dict(atoll=1), "unknown tolerance setting(s) atoll"),
])
def test_bad_rules(kwargs, message):
    with pytest.raises(tracekit.UsageError) as err:
        Tolerance().rule(**kwargs)
    assert message in str(err.value)


def test_toml_file(tmp_path):
    path = tmp_path / "tol.toml"
    path.write_text('atol = 1e-4\nequal_nan = true\n[[rule]]\nkind = "loss"\nsteps = [10, 100]\nrtol = 0.05\n'
                    'atol = 0\n[[rule]]\nkind = "grad"\nname = "*/bias:0"\nignore = true\n')
    t = Tolerance.load(str(path))
    assert t.atol == 1e-4 and t.equal_nan and len(t.rules) == 2
    assert t.resolve("loss", "loss", 50, "float32").rtol == 0.05
    assert t.resolve("grad", "d/bias:0", 0, "float32").ignore
    (tmp_path / "bad.toml").write_text("atol = [")
    with pytest.raises(tracekit.UsageError, match="is not valid TOML"):
        Tolerance.load(str(tmp_path / "bad.toml"))
    (tmp_path / "key.toml").write_text("atoll = 1\n")
    with pytest.raises(tracekit.UsageError, match="unknown key"):
        Tolerance.load(str(tmp_path / "key.toml"))
    with pytest.raises(tracekit.UsageError, match="cannot read tolerance file"):
        Tolerance.load(str(tmp_path / "none.toml"))


def test_roundoff_profile_per_kind_and_ulps_setting():
    from tracekit.comparison.tolerance import ROUNDOFF_ULPS

    r = Tolerance.roundoff()
    for kind, ulps in ROUNDOFF_ULPS.items():
        resolved = r.resolve(kind, "x", 7, "float32")
        assert (resolved.atol, resolved.rtol, resolved.ulps) == (0, 0, ulps)
    assert r.resolve("grad", "w", 0, "float16").eps == 2.0 ** -10  # in units of the dtype's own eps
    assert r.resolve("input", "x:0", 0, "float32").ulps == 0 and r.resolve("random", "d", 0, "float32").ulps == 0
    assert ROUNDOFF_ULPS["grad"] > ROUNDOFF_ULPS["tap"]  # gradients pass through more reductions
    exact = Tolerance.exact().resolve("var", "w", 0, "float32")
    assert (exact.atol, exact.rtol, exact.ulps, exact.equal_nan) == (0, 0, 0, True)
    t = Tolerance.from_dict({"ulps": 8, "rule": [{"kind": "grad", "ulps": 64}]})
    assert t.resolve("var", "w", 0, "float32").ulps == 8 and t.resolve("grad", "w", 0, "float32").ulps == 64
    assert t.rule(kind="tap", atol=1).ulps == 8  # rules keep the top-level setting


def test_the_training_preset_is_the_default_at_step_0_and_allows_port_noise_after():
    from tracekit.comparison.tolerance import TRAINING_ULPS

    preset = Tolerance.training()
    for kind in ("tap", "loss", "grad", "var", "slot"):
        first, later = preset.resolve(kind, "x", 0, "float32"), preset.resolve(kind, "x", 7, "float32")
        default = Tolerance().resolve(kind, "x", 7, "float32")
        assert (first.atol, first.rtol, first.ulps) == (default.atol, default.rtol, default.ulps)
        assert (later.atol, later.rtol, later.ulps) == (default.atol, default.rtol, TRAINING_ULPS[kind])
    assert preset.resolve("input", "x:0", 7, "float32").ulps == 0  # inputs and draws stay exact
    assert TRAINING_ULPS["grad"] > TRAINING_ULPS["tap"] > 0


def test_the_default_allows_a_sum_its_order_and_nothing_else():
    from tracekit.comparison.tolerance import REDUCTION_ULPS

    default = Tolerance()
    for kind in ("tap", "loss", "fetch", "grad"):  # sums: another kernel's order
        assert default.resolve(kind, "x", 0, "float32").ulps == REDUCTION_ULPS[kind] == 16
    for kind in ("var", "slot", "input", "random", "lr"):  # an update's slips show in a few ulps of these
        assert default.resolve(kind, "x", 0, "float32").ulps == 0
    assert default.resolve("grad", "x", 0, "int64").ulps == 0  # integers compare exactly
    # any atol, rtol or ulps set for a tensor is the whole of what is allowed
    for given in (Tolerance(atol=1e-3), Tolerance(rtol=1e-3), Tolerance(ulps=2), Tolerance().rule(kind="grad", atol=0),
                  Tolerance.exact()):
        assert given.resolve("grad", "x", 0, "float32").ulps in (0, 2)


def _naive(tol, kind, name, step):
    """resolve()'s settings as the rules define them: every rule, latest first, tried in full."""
    found = {}
    for rule in reversed(tol.rules):
        if rule.matches(kind, name, step):
            for key, value in rule.settings.items():
                found.setdefault(key, value)
    return found


def test_resolve_indexed_by_name_agrees_with_every_rule_tried():
    # a family of rule sets: exact names, globs, regexes, no name, kinds, step ranges, repeated names
    rng = np.random.default_rng(7)
    names = ["a/kernel:0", "a/bias:0", "b/kernel:0", "b[0]/w:0", "c*d:0"]
    patterns = names + ["a/*", "*kernel*", "re:b.*", None, "b[0]/w:0", "c*d:0"]
    for case in range(40):
        tol = Tolerance()
        for _ in range(int(rng.integers(1, 30))):
            start = int(rng.integers(-1, 6))
            tol = tol.rule(kind=[None, "var", "grad"][int(rng.integers(3))],
                           name=patterns[int(rng.integers(len(patterns)))],
                           steps=None if rng.random() < 0.4 else (start, None if rng.random() < 0.5 else start + 2),
                           atol=float(rng.integers(1, 100)), ulps=None if rng.random() < 0.5 else 3.0)
        for kind in ("var", "grad", "loss"):
            for name in names:
                for step in range(-1, 8):
                    want = _naive(tol, kind, name, step)
                    got = tol.resolve(kind, name, step, "float32")
                    unruled = Tolerance().resolve(kind, name, step, "float32")
                    assert got.atol == want.get("atol", unruled.atol), (case, kind, name, step)
                    assert got.ulps == want.get("ulps", 0.0 if "atol" in want else unruled.ulps), (case, kind, name)


def test_resolve_sees_rules_added_in_place():
    tol = Tolerance()
    assert tol.resolve("var", "w:0", 1, "float32").atol != 5.0
    tol.rules.append(Rule("var", "w:0", None, atol=5.0))
    assert tol.resolve("var", "w:0", 1, "float32").atol == 5.0
    tol.rules.append(Rule("var", "w:0", (3, None), atol=7.0))
    assert [tol.resolve("var", "w:0", k, "float32").atol for k in (1, 3)] == [5.0, 7.0]
