"""Two optimizers and an exponential moving average in one step (goldens/two_optimizers.h5,
recorded on TF 1.15.5 by tools/goldens/two_optimizers.py): the natural TF2 port, Keras SGD
for one group and Keras Adam for the other, passes with no hand-written update; each
optimizer is paired with the TF1 one whose slots and learning rate match."""

from __future__ import annotations

import pytest

import tracekit
from tools.ports import two_optimizers

from ..support import golden


def _replay(tf2, steps=None, **options):
    model, step, ema = two_optimizers.make(**options)
    return tf2.replay(golden("two_optimizers"), step, variables=two_optimizers.variables(model, ema), steps=steps)


def test_two_keras_optimizers_and_an_ema_replay_their_golden(tracekit_replay):
    model, step, ema = two_optimizers.make()
    result = tracekit_replay("two_optimizers", step, variables=two_optimizers.variables(model, ema))
    assert result.profile.name == "default" and result.steps == 10
    for kind, name in [("lr", "GradientDescent/learning_rate:0"), ("lr", "Adam/learning_rate:0"),
                       ("slot", "head/kernel/Adam_1:0"), ("var", "body/kernel/ExponentialMovingAverage:0"),
                       ("grad", "body/kernel:0"), ("grad", "head/bias:0"), ("var", "global_step:0")]:
        assert result.tensor(kind, name).steps >= 10, (kind, name)


@pytest.mark.parametrize("options, expected", [
    ({"body_lr": 0.05}, (0, "lr/GradientDescent/learning_rate:0")),
    ({"head_epsilon": 1e-3}, (0, "var/head/kernel:0")),  # (1e-7 vs 1e-8 stays within tolerance here)
    ({"ema_decay": 0.99}, (0, "var/body/kernel/ExponentialMovingAverage:0")),
])
def test_wrong_two_optimizer_ports_are_caught_where_they_depart(tf2, options, expected):
    result = tracekit.compare(golden("two_optimizers"), _replay(tf2, steps=3, **options))
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == expected, result.report()
    assert ("possible cause: Adam's epsilon" in result.report()) == ("head_epsilon" in options)


def test_optimizers_swapped_between_the_groups_are_refused_by_name(tf2):
    with pytest.raises(tracekit.ReplayError) as err:
        _replay(tf2, steps=1, swap=True)
    message = str(err.value)
    assert "the TF2 optimizer (SGD) has no slot for 4 of the golden's optimizer slots of the variables it updates" \
        in message and "only in the golden: head/kernel/Adam:0 (m of head/kernel:0)" in message
