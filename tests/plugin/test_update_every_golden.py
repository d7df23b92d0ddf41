"""The update workflow on every shipped golden, as a user's project runs it: the port changes on
purpose (it halves its first float input, as a new preprocessing would, also where a structure
holds it), its replay test fails, the golden is rewritten (tracekit accept; then, from the legacy golden again, pytest
--tracekit-update=all), the changed port passes against it, and `tracekit log` shows the update.
Goldens with optimizer slots (Adam, Momentum, Adagrad, FTRL: Keras makes slots at the first
update) keep the initial state the replay started from, and say so."""

from __future__ import annotations

import os
import shutil

import pytest

import tracekit
from tools.ports import EXAMPLES
from tracekit.cli import main
from tracekit.store import provenance

from ..support import golden

pytestmark = pytest.mark.slow

TEST = '''
from tools.ports import example_port

NAME = %r


def changed(step):
    """The port, changed on purpose: its first float input halved, wherever the step finds it (by
    its name, or in the structure it came in: an Estimator's features)."""
    if isinstance(step, dict):  # a step function per train op
        return {op: changed(function) for op, function in step.items()}

    def run(inputs):
        import tensorflow as tf

        name = min(k for k, v in inputs.items() if hasattr(v, "dtype") and v.dtype.is_floating)
        first = inputs[name]
        return step({k: tf.nest.map_structure(lambda v: v * 0.5 if v is first else v, value)
                     for k, value in inputs.items()})
    return run


def test_port(tracekit_replay):
    model, step, options = example_port(NAME)()
    tracekit_replay(NAME, changed(step), model=model, **options)
'''


@pytest.fixture(scope="module")
def ports_imported(warm):
    """The ports' modules imported before pytester snapshots sys.modules (see conftest.warm)."""
    import importlib

    for name in ("estimator_model", "gan_model", "keras_fit", "momentum_model", "rnn_model", "seed_example",
                 "slim_resnet", "two_optimizers"):
        importlib.import_module("tools.ports." + name)


def _slots(path):
    """(initial slots, slots in the steps) of a golden."""
    with tracekit.open(path) as trace:
        return ({key: trace.initial[key] for key in trace.initial if key.startswith("slot/")},
                {t.key for t in trace.catalog if t.kind == "slot" and t.steps})


def _updated_as_asked(path, slots, capsys):
    """The rewritten golden starts every slot it holds in its steps from the legacy golden's
    initial value, says why it changed, and `tracekit log` shows it."""
    # TF1's own optimizer state without a Keras counterpart (beta1_power) is not replayed.
    after, in_steps = _slots(path)
    assert set(after) == in_steps and set(after) <= set(slots)
    assert bool(after) == bool(slots)
    for key, value in after.items():
        assert value.tobytes() == slots[key].tobytes(), key
    with tracekit.open(path) as trace:
        prov = provenance.read(trace.meta, trace.created)
    assert prov.derived and [u.reason for u in prov.updates] == ["inputs halved on purpose"]
    assert set(after) <= set(prov.last.initial_kept)
    capsys.readouterr()
    assert main(["log", path]) == 0
    log = capsys.readouterr().out
    assert "update 1" in log and "inputs halved on purpose" in log and "drift against the golden it replaced" in log
    if slots:
        assert "kept from the replaced golden (made by the TF2 run only at its first step" in log


@pytest.mark.parametrize("name", EXAMPLES)
def test_a_changed_port_updates_its_golden_and_then_passes(project, ports_imported, capsys, name):
    goldens = project.path / "goldens"
    path = str(goldens / (name + ".h5"))
    if name != "seed_example":  # the project holds the seed golden already (its first 10 of 100 steps)
        shutil.copyfile(golden(name), path)
    legacy = shutil.copyfile(path, str(project.path / "legacy.h5"))
    project.makepyfile(test_port=TEST % name)
    slots, _ = _slots(path)
    # tracekit accept: the legacy golden catches the change, the replay is kept pending and accepted
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(failed=1)
    assert (project.path / ".tracekit" / "pending" / (name + ".h5")).exists()
    assert main(["accept", "--all", "--reason", "inputs halved on purpose"]) == 0
    # the changed port now passes against the accepted golden, from the same initial state
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    _updated_as_asked(path, slots, capsys)
    # pytest --tracekit-update=all, from the legacy golden again: that run rewrites it, the next passes
    shutil.copyfile(legacy, path)
    result = project.runpytest("-p", "no:cacheprovider", "--tracekit-update=all",
                               "--tracekit-reason", "inputs halved on purpose")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 updated*"])
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    _updated_as_asked(path, slots, capsys)
    assert sorted(os.listdir(str(goldens))) == sorted({"seed_example.h5", name + ".h5"})
