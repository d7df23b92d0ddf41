"""Gradients clipped by tf.clip_by_global_norm in TF 1.15 (plain_loop.py --clip): a PyTorch port
that clips with torch.nn.utils.clip_grad_norm_ is compared on what the update applied and on what
clipping was given ("<var>@unclipped", read as clip_grad_norm_ is called); one that does not clip
departs at step 0 on the gradients."""

from __future__ import annotations

import pytest

import tracekit
from tracekit.keys import UNCLIPPED

from ..support.recording import record_plain_loop

NORM = 0.1  # the recorded gradients' global norm is about 1: clipping is in force


@pytest.fixture(scope="module")
def golden(legacy_python, tmp_path_factory):
    return record_plain_loop(legacy_python, tmp_path_factory.mktemp("clip") / "clip.h5", "--steps", 5, "--clip", NORM,
                             "--dropout", 0)


def _check(tt, golden, clip):
    import torch

    from tools.ports.torch.tf_forms import TFAdam

    model = torch.nn.Sequential()
    model.add_module("hidden", torch.nn.Linear(3, 5))
    model.add_module("relu", torch.nn.ReLU())
    model.add_module("out", torch.nn.Linear(5, 1))
    optimizer = TFAdam(model.parameters(), lr=0.05, eps=1e-8)

    def step(inputs):
        optimizer.zero_grad()
        loss = ((model(inputs["x:0"]) - 1.0) ** 2).mean()
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), NORM)
        optimizer.step()
        return loss
    return tt.check(golden, step, model=model, optimizer=optimizer)


def test_a_port_that_clips_matches_before_and_after_clipping(tt, golden):
    result = _check(tt, golden, clip=True)
    assert result.ok and not result.missing, result.report()
    with tracekit.open(golden) as trace:
        unclipped = [n for n in trace.names("grad") if n.endswith(UNCLIPPED)]
    assert len(unclipped) == 4 and {"grad/" + n for n in unclipped} <= {t.key for t in result.tensors}


def test_a_port_that_does_not_clip_departs_at_step_0(tt, golden):
    result = _check(tt, golden, clip=False)
    first = result.first_divergence
    assert not result.ok and first.step == 0 and first.key.startswith("grad/"), result.report()
    assert not first.key.endswith(UNCLIPPED)  # what it was given to clip agrees: the clipping is what differs
