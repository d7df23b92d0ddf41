"""A tf_slim ResNet (goldens/slim_resnet.h5: convolutions with batch norm, max-pooling, momentum SGD,
slim's L2 regularizer) ported to PyTorch: HWIO kernels compared in TF's layout, batch norm's four
variables by TF's names, the regularization compared as the golden's sum. The port matches at the
default tolerance, teacher-forced and not (its batch-norm momentum computed as TF1 computes slim's
1 - decay, in float32: teacher-forced, 0.003 shows at step 1); its slips depart at step 0."""

from __future__ import annotations

import pytest

from tools.ports.torch import slim_resnet
from tracekit.comparison.fingerprints import AVERAGE_RATE

from ..support import golden


@pytest.mark.parametrize("forcing", ["none", "state"])
def test_the_resnet_port_matches(tt, forcing):
    model, step, own = slim_resnet.make()
    result = tt.check(golden("slim_resnet"), step, model=model, forcing=forcing, **own)
    assert result.ok and result.steps == 5, result.report()
    assert result.tensor("loss", "regularization").steps == 5 and "loss/regularization" not in result.not_compared
    keys = {t.key for t in result.tensors}
    assert {"var/resnet_small/conv1/weights:0", "var/resnet_small/conv1/BatchNorm/moving_variance:0",
            "slot/resnet_small/conv1/weights/Momentum:0", "loss/regularization", "grad/resnet_small/logits/weights:0"} \
        <= keys, sorted(keys)


@pytest.mark.parametrize("slip, expected, cause", [
    # torch's symmetric padding where TF's SAME pads the bottom and right
    ({"symmetric_pool": True}, (0, "loss/loss"), None),
    # slim's decay given to torch, whose momentum is 1 - it
    ({"momentum": 0.997}, (0, "var/resnet_small/conv1/BatchNorm/moving_mean:0"), AVERAGE_RATE),
    # Nesterov's momentum where slim's MomentumOptimizer takes the plain one: 1 + 0.9 times the step
    # where the accumulators start, named as such
    ({"nesterov": True}, (0, "var/resnet_small/conv1/weights:0"), "lr-factor"),
])
def test_the_resnet_slips_depart_at_step_0(tt, slip, expected, cause):
    model, step, own = slim_resnet.make(**slip)
    result = tt.check(golden("slim_resnet"), step, model=model, **own)
    first = result.first_divergence
    assert not result.ok and (first.step, first.key) == expected, result.report()
    assert cause is None or cause in {hint.code for hint in result.fingerprints}, result.report()
    if slip.get("nesterov"):
        assert "or Nesterov's momentum" in result.report() and "1 + mu = 1.9 times" in result.report()
