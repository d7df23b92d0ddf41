"""Deriving a calibrated tolerance from measured spread (comparison/calibration.py), without
TensorFlow: the floor, the margin, the bands of steps, the cap, and the TOML it writes."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tracekit.comparison.calibration import CAP_ULPS, DEFAULT_MARGIN, Spread, bands, derive
from tracekit.comparison.tolerance import REDUCTION_ULPS, TRAINING_ULPS, literal

from ..support.lifecycle import replayed


def spread_of(deviation, steps=16, runs=3):
    return Spread({key: dict(by_step) for key, by_step in deviation.items()}, runs=runs, steps=steps)


def test_bands_start_at_step_1_double_and_the_last_is_open():
    assert bands(1) == []  # one step: the default tolerance alone
    assert bands(2) == [(1, None)]
    assert bands(16) == [(1, 2), (2, 4), (4, 8), (8, None)]
    assert bands(17) == [(1, 2), (2, 4), (4, 8), (8, 16), (16, None)]


def test_within_the_floor_nothing_is_written():
    derived = derive(spread_of({("grad", "w:0"): {1: 1.0, 5: TRAINING_ULPS["grad"] / DEFAULT_MARGIN}}))
    assert derived.bounds == [] and derived.unbounded == [] and not derived.tolerance.accept_noise
    # the floor itself is in the tolerance: the training profile's allowance from step 1
    assert derived.tolerance.resolve("grad", "w:0", 5, "float32").ulps == TRAINING_ULPS["grad"]
    assert derived.tolerance.resolve("grad", "w:0", 0, "float32").ulps == REDUCTION_ULPS["grad"]  # the default's


def test_the_margin_over_the_floor_rounds_up_to_a_power_of_two_per_band():
    floor = TRAINING_ULPS["var"]
    deviation = {1: floor, 2: floor, 3: 3 * floor, 4: 3.5 * floor, 9: 100.0}
    derived = derive(spread_of({("var", "bn/moving_mean:0"): deviation}))
    rules = [(b.start, b.stop, b.ulps) for b in derived.bounds]
    # step 1: 1.5 x floor -> 2 x floor; steps 2-3 and 4-7: 4.5 and 5.25 x floor -> 8 x floor, one
    # rule for both; steps 8-: within the floor, no rule
    assert rules == [(1, 2, 2 * floor), (2, 8, 8 * floor)]
    assert derived.bounds[1].measured == 3.5 * floor
    tolerance = derived.tolerance
    assert [tolerance.resolve("var", "bn/moving_mean:0", k, "float32").ulps for k in (0, 1, 3, 7, 8)] == \
        [0, 2 * floor, 8 * floor, 8 * floor, floor]
    assert tolerance.resolve("var", "other:0", 3, "float32").ulps == floor  # only that tensor widens
    assert derive(spread_of({("var", "v:0"): {1: floor}}), margin=1.0).bounds == []


def test_beyond_the_cap_is_refused_held_at_the_cap_and_left_to_the_noise_analysis():
    derived = derive(spread_of({("var", "hidden/bias:0"): {1: 3e7, 2: 5e7},
                                ("var", "bn/moving_mean:0"): {1: 1e3, 8: CAP_ULPS},
                                ("grad", "hidden/bias:0"): {1: float("inf")}}))
    assert [(u.key, u.step) for u in derived.unbounded] == [
        ("var/hidden/bias:0", 1), ("var/bn/moving_mean:0", 8), ("grad/hidden/bias:0", 1)]
    assert derived.tolerance.accept_noise
    assert max(b.ulps for b in derived.bounds) == CAP_ULPS
    assert derived.tolerance.resolve("var", "hidden/bias:0", 3, "float32").ulps == CAP_ULPS


def test_a_name_with_glob_characters_gets_a_rule_for_itself_only():
    derived = derive(spread_of({("slot", "cell[0]/m:0"): {1: 1e4}}))
    tolerance = derived.tolerance
    assert tolerance.resolve("slot", "cell[0]/m:0", 1, "float32").ulps == 16384
    assert tolerance.resolve("slot", "cell0/m:0", 1, "float32").ulps == TRAINING_ULPS["slot"]
    assert literal("a/b:0") == "a/b:0"
    rule = tracekit.Tolerance().rule(name=literal("re:x"), ulps=1).rules[0]
    assert rule.matches("var", "re:x", 1) and not rule.matches("var", "x", 1)


def test_the_toml_reads_back_as_the_same_tolerance(tmp_path):
    derived = derive(spread_of({("var", "a*[1]:0"): {1: 1e4, 12: 1e9}, ("loss", "loss"): {3: 700.0}}))
    path = tmp_path / "tolerance.toml"
    path.write_text(derived.tolerance.to_toml())
    loaded = tracekit.Tolerance.load(str(path))
    assert loaded.to_dict() == derived.tolerance.to_dict()
    for kind, name in (("var", "a*[1]:0"), ("var", "a1:0"), ("loss", "loss")):
        for step in range(20):
            assert loaded.resolve(kind, name, step, "float32") == derived.tolerance.resolve(kind, name, step, "float32")


def test_spread_takes_each_tensor_s_largest_deviation_per_step_over_the_runs(tmp_path):
    base = replayed(str(tmp_path / "base.h5"))
    eps = np.finfo(np.float32).eps

    def moved(by):  # var/w:0 moved by `by` ulps of its scale from step 1 on, the gradient by 1 at step 2
        def change(k, key, value):
            if key == "var/w:0" and k >= 1:
                return (value + np.float32(by * eps * np.abs(value).max())).astype(value.dtype)
            if key == "grad/w:0" and k == 2:
                return np.nextafter(value, np.float32(np.inf))
            return value
        return change
    spread = Spread()
    for n, by in enumerate((8, 64)):
        run = replayed(str(tmp_path / ("run%d.h5" % n)), change=moved(by))
        spread.add(tracekit.compare(base, run, tracekit.Tolerance.exact()))
    assert spread.runs == 2 and spread.steps == 4
    var = spread.deviation[("var", "w:0")]
    assert 60 < var[1] < 68 and set(var) == {1, 2, 3}  # not step 0 nor the initial state
    assert 0 < spread.deviation[("grad", "w:0")][2] <= 1 and ("input", "x:0") not in spread.deviation
    assert spread.largest()["var"] == pytest.approx(max(var.values()))


def test_moments_measured_as_digests_become_a_rule_per_band_over_the_floor_until_one_is_unbounded():
    floor = TRAINING_ULPS["var"]
    spread = Spread(moments={("var", "w:0"): {1: 10.0, 2: floor, 5: 3 * floor, 9: float("inf")},
                             ("var", "b:0"): {1: 1.0}}, runs=2, steps=16)
    tolerance = derive(spread, margin=4.0).tolerance
    moments = [tolerance.resolve("var", "w:0", k, "float32").moments for k in (0, 1, 2, 4, 8, 12)]
    # step 0 and the band from step 8 (a run moved it without bound) get none; band 1 the floor;
    # 2-3 4 x floor; 4-7 12 x floor rounded up to 16 x
    assert moments == [float("inf"), floor, 4 * floor, 16 * floor, float("inf"), float("inf")]
    assert tolerance.resolve("var", "b:0", 12, "float32").moments == floor  # the last band held open
    assert tolerance.resolve("var", "other:0", 3, "float32").moments == float("inf")


def test_a_tensor_of_few_elements_is_bounded_by_its_band_and_the_next():
    # one element's deviation is one draw: the loss's at step 8 counts for steps 4-7 too
    floor = TRAINING_ULPS["loss"]
    deviation = {("loss", "loss"): {7: 4 * floor, 8: 16 * floor}, ("tap", "h"): {7: 4 * floor, 8: 16 * floor}}
    spread = spread_of(deviation)
    spread.few = {("loss", "loss")}
    tolerance = derive(spread, margin=1.0).tolerance
    assert tolerance.resolve("loss", "loss", 7, "float32").ulps == 16 * floor
    assert tolerance.resolve("tap", "h", 7, "float32").ulps == 4 * floor  # many elements: its own band


def test_spread_keeps_how_far_digests_moved_as_a_whole():
    from types import SimpleNamespace

    from tracekit.comparison.digests import compare_digests
    from tracekit.comparison.series import StatsSeries
    from tracekit.comparison.stats import compare_values
    from tracekit.store.digest import digest

    g = np.linspace(-1, 1, 5000, dtype=np.float32)
    exact = tracekit.Tolerance.exact().resolve("var", "w:0", 1, "float32")
    # step 1 compared as digests, step 2 in full (a keyframe): only the first measures moments
    by_step = StatsSeries()  # as a comparison keeps them
    by_step.append(1, compare_digests(digest(g), digest(g * np.float32(1.001)), exact))
    by_step.append(2, compare_values(g, g * np.float32(1.001), exact))
    spread = Spread()
    spread.add(SimpleNamespace(tensors=[SimpleNamespace(kind="var", name="w:0", by_step=by_step)], steps=3))
    assert spread.moments[("var", "w:0")] == {1: pytest.approx(1e-3 / np.finfo(np.float32).eps, rel=0.01)}
    assert spread.deviation[("var", "w:0")][1] > 0


ODD = 'quote" back\\slash \U0001f600 del\x7f tab\t[*]'  # each needs its own escape in TOML


@pytest.mark.parametrize("tolerance", [
    tracekit.Tolerance.exact(),  # atol = rtol = 0: written, not left to the defaults
    tracekit.Tolerance(atol=np.float32(1e-4), ulps=np.float64(3.0)).rule(kind="grad", steps=(None, 3), atol=0)
    .rule(kind="var", steps=(None, None), ignore=True).rule(kind="slot", steps=(2, None), rtol=np.float64(0.5)),
    tracekit.Tolerance().rule(name=literal(ODD), ulps=8),
    tracekit.Tolerance().rule(kind="var", name="w:0", steps=(2, 4), moments=2048.0),
], ids=["exact", "open-steps-and-numpy", "odd-name", "moments"])
def test_any_tolerance_reads_back_from_its_toml(tmp_path, tolerance):
    path = tmp_path / "t.toml"
    path.write_text(tolerance.to_toml(), encoding="utf-8")
    loaded = tracekit.Tolerance.load(str(path))
    for kind, name in (("grad", "w:0"), ("var", "w:0"), ("slot", "w:0"), ("tap", ODD), ("tap", "quote")):
        for step in (-1, 0, 1, 2, 3, 5):
            assert loaded.resolve(kind, name, step, "float32") == tolerance.resolve(kind, name, step, "float32"), \
                (kind, name, step)
    assert loaded.equal_nan == tolerance.equal_nan and loaded.accept_noise == tolerance.accept_noise


@pytest.mark.parametrize("seed", range(40))
def test_another_run_only_widens_what_the_tolerance_allows(seed):
    # The drift envelope makes its perturbed replays one at a time and stops where the port is
    # inside (tf2/verdict.py): sound only if adding a run never narrows any bound. Runs measure
    # the same steps of the same tensors (one capture schedule, one port); deviations span the floor to beyond the cap, some
    # not finite; some tensors have few elements, some were compared as digests.
    rng = np.random.RandomState(seed)
    steps = int(rng.randint(2, 40))
    kinds = sorted(TRAINING_ULPS)
    tensors = [(kinds[rng.randint(len(kinds))], "t%d:0" % i) for i in range(int(rng.randint(1, 6)))]
    measured = {t: sorted(set(rng.randint(1, steps, size=rng.randint(1, steps)).tolist())) for t in tensors}
    few = {t for t in tensors if rng.rand() < 0.3}
    digested = [t for t in tensors if rng.rand() < 0.5]  # compared as digests: moments measured

    def run():
        def draw():
            return float("inf") if rng.rand() < 0.05 else float(10.0 ** rng.uniform(-1, 9))
        return ({t: {k: draw() for k in measured[t]} for t in tensors},
                {t: {k: draw() for k in measured[t]} for t in digested})

    def spread(*runs):
        out = Spread(runs=len(runs), steps=steps, few=set(few))
        for deviation, moments in runs:
            for into, of in ((out.deviation, deviation), (out.moments, moments)):
                for t, by_step in of.items():
                    seen = into.setdefault(t, {})
                    for k, v in by_step.items():
                        seen[k] = max(seen.get(k, 0.0), v)
        return out

    first, second = run(), run()
    one = derive(spread(first), margin=4.0, cap=float("inf")).tolerance
    both = derive(spread(first, second), margin=4.0, cap=float("inf")).tolerance
    assert both.accept_noise >= one.accept_noise
    for kind, name in tensors + [("var", "unmeasured:0")]:
        for k in range(-1, steps + 2):
            a, b = one.resolve(kind, name, k, "float32"), both.resolve(kind, name, k, "float32")
            assert b.ulps >= a.ulps and b.moments >= a.moments, (kind, name, k)
            assert (b.atol, b.rtol, b.ignore) == (a.atol, a.rtol, a.ignore)
