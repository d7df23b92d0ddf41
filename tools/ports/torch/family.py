"""PyTorch ports of the family's goldens (tools/family_spec.py, recorded by tools/goldens/family.py),
written as a migrating team writes them: an nn.Module of Linear (or Conv2d and MaxPool2d) layers
in a ModuleList, paired with TF1's `dense_<i>` scopes by a var_map of rules; the conv net reads
TF's NHWC batches and flattens in TF's order; TF's Adam (tf_forms.TFAdam, epsilon 1e-8),
torch.optim.SGD for TF1's Momentum (the same accumulator), torch's RMSprop with TF1's start
(tf_forms.TFStartRMSprop: the mean squares at 1.0); TF1's exponential decay of the rate set on
the optimizer before each step from the step count the model keeps (a buffer the replay pairs with
TF1's global_step); the L2 weight decay in the loss.

make_port(run, slip=False) -> (model, step, {"optimizer": ..., "var_map": ...}): slip=True makes
the run's wrong port (its slip from run.slip_at on).
"""

import torch
import torch.nn.functional as F

from tools import family_spec as spec

from .tf_forms import TFAdam, TFStartRMSprop

ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh, "gelu": lambda x: F.gelu(x, approximate="none"),
               "conv": torch.relu}


class Net(torch.nn.Module):
    def __init__(self, run):
        super().__init__()
        self.run = run
        if run.model == "conv":
            channels = [3] + [run.channels] * (run.depth - 1)
            self.hidden = torch.nn.ModuleList(torch.nn.Conv2d(channels[i], channels[i + 1], 3, padding=1)
                                              for i in range(run.depth - 1))
            side = spec.IMAGE // 2 ** (run.depth - 1)
            last = run.channels * side * side
        else:
            widths = [run.features] + [run.width] * (run.depth - 1)
            self.hidden = torch.nn.ModuleList(torch.nn.Linear(widths[i], widths[i + 1]) for i in range(run.depth - 1))
            last = widths[-1]
        self.logits = torch.nn.Linear(last, spec.CLASSES)
        # TF1's global_step, kept where the replay pairs it with the golden's (and sets it, teacher-forced)
        self.register_buffer("global_step", torch.zeros((), dtype=torch.int64))

    def forward(self, x):
        act = ACTIVATIONS[self.run.model]
        if self.run.model == "conv":
            x = x.permute(0, 3, 1, 2)  # TF's NHWC batch
            for layer in self.hidden:
                x = F.max_pool2d(act(layer(x)), 2, 2)
            x = x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)  # flattened in TF's order
        else:
            for layer in self.hidden:
                x = act(layer(x))
        if self.run.dropout:
            x = F.dropout(x, self.run.dropout, training=True)
        return self.logits(x)


def _optimizer(run, model):
    rate = spec.RATES[run.optimizer]
    if run.optimizer == "momentum":
        return torch.optim.SGD(model.parameters(), lr=rate, momentum=spec.MOMENTUM)
    if run.optimizer == "adam":
        return TFAdam(model.parameters(), lr=rate, eps=1e-8)
    return TFStartRMSprop(model.parameters(), lr=rate, alpha=spec.RHO, eps=spec.RMS_EPSILON)


def make_port(run, slip=False):
    slip = run.slip if slip else None
    model = Net(run)
    optimizer = _optimizer(run, model)
    kernels = [layer.weight for layer in list(model.hidden) + [model.logits]]
    scaled = model.hidden[run.slip_layer].weight

    def step(batch):
        at = int(model.global_step)
        if run.optimizer != "momentum":  # TF1's exponential_decay, read one step late from slip_at by the slip
            late = slip == "late" and at >= run.slip_at
            for group in optimizer.param_groups:
                group["lr"] = spec.RATES[run.optimizer] * 0.5 ** ((at - late) / spec.RATE_HALVING)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(batch["x:0"]), batch["y:0"])
        decay = spec.DECAY * sum((k * k).sum() / 2 for k in kernels)
        if not (slip == "decay" and at >= run.slip_at):
            loss = loss + decay
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            model.global_step += 1
            if slip == "scale" and at == run.slip_at:
                scaled.mul_(1.0 + spec.SCALE)
        return {"loss": loss}

    kind = "conv" if run.model == "conv" else "dense"
    var_map = [(r"^%s_(\d+)/kernel:0$" % kind, r"hidden.\1.weight"), (r"^%s_(\d+)/bias:0$" % kind, r"hidden.\1.bias")]
    return model, step, {"optimizer": optimizer, "var_map": var_map}
