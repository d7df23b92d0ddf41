"""Alternating train ops (goldens/gan_model.h5, recorded on TF 1.15.5): a GAN's discriminator
and generator steps are separate runs of separate train ops, each with its own named Adam.
The golden says which train op each step ran; the port gives one step function per train op."""

from __future__ import annotations

import pytest

import tracekit
from tools.ports import gan_model
from tracekit.replay.loop import step_for

from ..support import golden

GOLDEN = golden("gan_model")


def replay(tf2, steps=None, **options):
    models, step_fns = gan_model.make(**options)
    return tf2.replay(GOLDEN, step_fns, variables=gan_model.variables(models), steps=steps)


def test_the_golden_says_which_train_op_each_step_ran():
    with tracekit.open(GOLDEN) as trace:
        assert trace.meta["train_ops"] == ["d_adam", "g_adam"]
        assert [trace.step(i).info["train_ops"] for i in range(4)] == [["d_adam"], ["g_adam"]] * 2
        # Each kind of step holds its own loss and the gradients of its own variables.
        assert "loss/loss" in trace.step(1) and trace.step(1).names("grad")[0].startswith("generator/")


def test_a_port_with_a_step_per_train_op_matches(tracekit_replay):
    models, step_fns = gan_model.make()
    result = tracekit_replay("gan_model", step_fns, variables=gan_model.variables(models))  # the default tolerance
    assert result.profile.name == "default" and result.steps == 12
    compared = {t.key for t in result.tensors}
    # Both optimizers' slots are paired by what the recorder saw them be, not by their names.
    assert {"slot/discriminator/hidden/kernel/d_adam_1:0", "slot/generator/out/bias/g_adam:0",
            "var/global_step:0", "grad/generator/out/kernel:0"} <= compared


@pytest.mark.parametrize("options, expected", [
    ({"leaky_alpha": 0.3}, (0, "loss/loss")),  # Keras LeakyReLU's default; tf.nn.leaky_relu's is 0.2
    ({"beta_1": 0.9}, (0, "slot/discriminator/hidden/kernel/d_adam:0")),  # Keras' default; Adam's first update is the same
    ({"g_lr": 2e-3}, (1, "lr/learning_rate")),  # the generator's first step is step 1
])
def test_wrong_gan_ports_are_caught_where_they_depart(tf2, options, expected):
    result = tracekit.compare(GOLDEN, replay(tf2, steps=4, **options))
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == expected, result.report()


def test_step_functions_swapped_are_refused_at_the_first_step(tf2):
    # Step 0 trained the discriminator in the golden, the generator in the port.
    with pytest.raises(tracekit.ReplayError, match=r"(?s)step 0: the golden's step updated the variables of 8 "
                                                   r"optimizer slots.*discriminator/hidden/kernel/d_adam:0"):
        replay(tf2, steps=2, swap=True)


def test_a_missing_step_function_names_the_train_op(tf2):
    models, step_fns = gan_model.make()
    with pytest.raises(tracekit.ReplayError, match=r"step 1 ran train op g_adam; the step functions given are for "
                                                   r"d_adam"):
        tf2.replay(GOLDEN, {"d_adam": step_fns["d_adam"]}, variables=gan_model.variables(models), steps=2)


def test_step_for():
    def a(inputs):
        return None

    def b(inputs):
        return None
    assert step_for(a, {}, 0, "g.h5") is a
    assert step_for({"x": a, "y": b}, {"train_ops": ["y"]}, 3, "g.h5") is b
    assert step_for({"x": a, "x+y": b}, {"train_ops": ["x", "y"]}, 3, "g.h5") is b  # a run of both
    assert step_for({"x": a}, {"train_ops": ["x", "z"]}, 3, "g.h5") is a  # the only one it has
    with pytest.raises(tracekit.ReplayError, match="step 3 ran train op x\\+y; .* for x, y"):
        step_for({"x": a, "y": b}, {"train_ops": ["x", "y"]}, 3, "g.h5")
    with pytest.raises(tracekit.ReplayError, match="g.h5, step 0: the golden does not say which train op"):
        step_for({"x": a}, {"global_step": 1}, 0, "g.h5")


def test_a_step_that_is_neither_a_function_nor_a_dict_of_them_is_refused(tf2):
    with pytest.raises(tracekit.UsageError, match="a dict \\{train op name: function\\}"):
        tf2.replay(GOLDEN, {"d_adam": 3})
